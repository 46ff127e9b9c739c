"""`firstfault sql` is read-only in every sense: real queries that would write, read outside the warehouse and lake,
or change the connection's settings are refused with exit status 2 and one line; a long query is stopped; the lake
is readable as views; a writer waiting for a reader gets the file once the reader's time limit stops it."""
import os
import subprocess
import sys
import time

import pytest

from firstfault.cli import main
from firstfault.warehouse.store import connect_writer

HEAVY = "SELECT count(*) FROM range(1000000) a, range(1000000) b WHERE a.range + b.range = -1"


@pytest.fixture(scope="module")
def warehouse(demo_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("sql")
    args = ["--warehouse", str(root / "w.duckdb"), "--lake", str(root / "lake")]
    assert main(["attribute", "--static", str(demo_dir / "attempts" / "headline" / "attempt.yaml"), *args]) == 0
    return root, args


def sql(args, query, *extra):
    return main(["sql", *args, *extra, query])


@pytest.mark.parametrize("query", [
    "ATTACH '{root}/other.duckdb' (READ_WRITE)",
    "ATTACH '{root}/hardlink.duckdb' AS same (READ_WRITE)",  # the warehouse itself, through a hard link
    "ATTACH '{root}/lake/inside.duckdb' (READ_WRITE)",      # a DuckDB file inside the allowed lake
    "COPY attributions TO '{root}/copy.csv'",
    "COPY attributions TO '{root}/lake/copy.csv'",           # the lake is readable, not writable
    "COPY (SELECT 1) TO '{root}/copy.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{root}/export'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/**')",
    "SELECT * FROM read_text('{root}/lake/../secret.txt')",
    "SELECT * FROM read_parquet('http://169.254.169.254/x.parquet')",
    "SET threads = 1",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "PRAGMA threads = 1",
    "LOAD httpfs",
    "INSTALL httpfs",
    "DELETE FROM attributions",
    "CREATE TABLE copied AS SELECT * FROM attributions",
    "CALL pragma_version()",
    "SELECT 1; DROP TABLE attributions",
])
def test_writes_outside_reads_and_settings_are_refused(warehouse, query, capsys):
    root, args = warehouse
    for name in ("other.duckdb", "lake/inside.duckdb"):
        if not (root / name).exists():
            connect_writer(str(root / name)).close()
    if not (root / "hardlink.duckdb").exists():
        os.link(root / "w.duckdb", root / "hardlink.duckdb")
    (root / "secret.txt").write_text("secret\n")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    stamps = {p: p.stat().st_mtime_ns for p in root.rglob("*.duckdb")}

    assert sql(args, query.format(root=root)) == 2
    err = capsys.readouterr().err
    assert err.startswith("firstfault: <query>: field 'sql': ") and err.count("\n") == 1, err
    assert "secret" not in capsys.readouterr().out
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing written
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.duckdb")} == stamps


def test_reads_of_the_warehouse_and_the_lake_still_work(warehouse, capsys):
    root, args = warehouse
    assert sql(args, "SELECT verdict FROM attributions", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == ["verdict", "attributed"]
    assert sql(args, "SELECT count(*) > 0 AS lines FROM lake.logs WHERE raw LIKE '%Xid%'", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == ["lines", "True"]
    assert sql(args, "SELECT DISTINCT kind FROM lake.events WHERE kind = 'xid'", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == ["kind", "xid"]
    files = f"{root}/lake/logs/*/*/*.parquet"
    assert sql(args, f"SELECT count(*) > 0 AS n FROM read_parquet('{files}')", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == ["n", "True"]
    for query in ("EXPLAIN SELECT * FROM attributions", "DESCRIBE attributions", "SHOW TABLES",
                  "WITH a AS (SELECT 1 AS x) SELECT * FROM a"):
        assert sql(args, query) == 0, query


def test_a_long_query_is_stopped_by_the_time_limit(warehouse, capsys):
    _, args = warehouse
    started = time.monotonic()
    assert sql(args, HEAVY, "--timeout", "1") == 2
    assert time.monotonic() - started < 15
    assert "stopped after 1 s (--timeout)" in capsys.readouterr().err
    assert sql(args, "SELECT 1", "--timeout", "0") == 2
    assert sql(args, "SELECT 1", "--timeout", "301") == 2


def test_a_writer_waits_for_a_long_reader_instead_of_failing(warehouse):
    root, args = warehouse
    reader = subprocess.Popen([sys.executable, "-m", "firstfault.cli", "sql", *args, "--timeout", "5", HEAVY],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.5)  # the reader holds the file now, busy with its query
        assert reader.poll() is None
        started = time.monotonic()
        con = connect_writer(str(root / "w.duckdb"))  # waits until the reader's time limit stops it
        con.close()
        assert time.monotonic() - started > 0.5
        assert reader.wait(timeout=30) == 2 and "stopped after 5 s" in reader.stderr.read()
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
