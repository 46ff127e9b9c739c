"""One writer per DuckDB file: a writer that finds the file held by a reader in another process waits for it."""
import subprocess
import sys

from firstfault.warehouse.store import connect_writer

HOLD = "import duckdb, sys, time; con = duckdb.connect(sys.argv[1], read_only=True); print('open', flush=True); time.sleep(1.5)"


def test_a_writer_waits_for_a_reader_in_another_process(tmp_path):
    path = str(tmp_path / "wh.duckdb")
    connect_writer(path).close()
    reader = subprocess.Popen([sys.executable, "-c", HOLD, path], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "open"  # the reader holds the file now
        con = connect_writer(path)  # without waiting this raises duckdb.IOException (lock)
        con.execute("INSERT INTO runs (run_id, flow) VALUES ('r', 'test')")
        assert con.sql("SELECT count(*) FROM runs").fetchall() == [(1,)]
        con.close()
    finally:
        reader.wait(timeout=30)
