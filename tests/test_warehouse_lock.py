"""One writer per DuckDB file: a writer that finds the file held by a reader in another process waits for it; the
schema is created in one transaction."""
import subprocess
import sys

import duckdb
import pytest

from firstfault.warehouse import store
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


def test_the_schema_is_created_in_one_transaction(tmp_path, monkeypatch):
    """A writer that dies half-way through the schema leaves no half-made warehouse behind."""
    path = str(tmp_path / "wh.duckdb")
    monkeypatch.setattr(store, "schema_sql", lambda: "CREATE TABLE attributions (a INT); SELECT * FROM no_such_table;")
    with pytest.raises(duckdb.CatalogException):
        connect_writer(path)
    con = duckdb.connect(path, read_only=True)
    assert con.execute("SELECT count(*) FROM information_schema.tables").fetchall() == [(0,)]
    con.close()
    monkeypatch.undo()
    connect_writer(path).close()
    con = duckdb.connect(path, read_only=True)
    assert {"attributions", "run_failures", "runs"} <= {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
