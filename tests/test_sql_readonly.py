"""`firstfault sql` is read-only in every sense: real queries that would write, read outside the warehouse and lake,
or change the connection's settings are refused with exit status 2 and one line; a long query is stopped; the lake
is readable as views; a writer waiting for a reader gets the file once the reader's time limit stops it."""
import os
import shutil
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
    # EXPLAIN ANALYZE runs the statement it explains: in every spelling, whatever the statement
    "EXPLAIN ANALYZE COPY (SELECT 'forged' AS raw) TO '{root}/lake/forged.parquet'",
    "EXPLAIN (ANALYZE) COPY (SELECT 'forged' AS raw) TO '{root}/lake/forged.parquet'",
    "EXPLAIN (FORMAT json, ANALYZE) COPY (SELECT 'forged' AS raw) TO '{root}/lake/forged.parquet'",
    "EXPLAIN (ANALYZE false) COPY (SELECT 'forged' AS raw) TO '{root}/lake/forged.parquet'",
    'EXPLAIN ("analyze") COPY (SELECT 1) TO \'{root}/lake/forged.parquet\'',
    "explain /* a comment */ analyze -- another\n copy (select 1) to '{root}/lake/forged.parquet'",
    "eXpLaIn AnAlYsE COPY (SELECT 1) TO '{root}/lake/forged.parquet'",
    "EXPLAIN ANALYZE CREATE TABLE lake.t AS SELECT 1",
    "EXPLAIN ANALYZE CREATE MACRO lake.m(x) AS x",
    "EXPLAIN ANALYZE VACUUM",
    "EXPLAIN ANALYZE CALL pragma_version()",
    "EXPLAIN ANALYZE SELECT 1",
    "EXPLAIN COPY (SELECT 1) TO '{root}/lake/forged.parquet'",
    "EXPLAIN CREATE TABLE lake.t AS SELECT 1",
    "CREATE TABLE lake.t AS SELECT 1",
    "EXPLAIN SELECT 1; EXPLAIN ANALYZE VACUUM",
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


def test_explain_analyze_never_overwrites_a_lake_file(warehouse, capsys):
    root, args = warehouse
    target = sorted((root / "lake" / "events").rglob("*.parquet"))[0]
    before = target.read_bytes()
    for form in ("EXPLAIN ANALYZE", "EXPLAIN (ANALYZE)", "explain/**/analyze", "EXPLAIN (FORMAT json, ANALYZE)"):
        assert sql(args, f"{form} COPY (SELECT 'forged' AS raw) TO '{target}' (FORMAT parquet)") == 2, form
        assert "EXPLAIN" in capsys.readouterr().err
    assert target.read_bytes() == before
    assert sql(args, "SELECT count(*) AS forged FROM lake.events WHERE kind IS NULL", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == ["forged", "0"]


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
                  "WITH a AS (SELECT 1 AS x) SELECT * FROM a", "explain /* plan */ select 1",
                  "EXPLAIN -- plan\n WITH a AS (SELECT 1 AS x) SELECT * FROM a"):
        assert sql(args, query) == 0, query
    assert sql(args, "EXPLAIN (FORMAT json) SELECT * FROM lake.logs", "--format", "csv") == 0
    assert '""name"": ""' in capsys.readouterr().out  # the plan as JSON, not run


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


def run_sql(args, *extra, timeout=120):
    """`firstfault sql` in its own process: (exit status, stdout, stderr, peak RSS in MB, seconds)."""
    started = time.monotonic()
    read, write = os.pipe()
    try:
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f"/dev/fd/{write}", sys.executable, "-m", "firstfault.cli",
                               "sql", *args, *extra], capture_output=True, text=True, timeout=timeout, pass_fds=(write,))
    finally:
        os.close(write)
    with os.fdopen(read) as f:
        peak_kb = int(f.read().split()[-1])
    return done.returncode, done.stdout, done.stderr, peak_kb >> 10, time.monotonic() - started


def test_a_huge_result_is_cut_at_the_limit_in_bounded_memory(warehouse):
    _, args = warehouse
    code, out, err, peak_mb, _ = run_sql(args, "SELECT range AS n, repeat('x', 40) AS pad FROM range(100000000)",
                                         "--format", "csv")
    assert code == 0, err
    assert len(out.splitlines()) == 1 + 10_000 and out.splitlines()[-1].startswith("9999,")
    assert err.strip() == "firstfault: sql: more than 10000 rows: the first 10000 are shown (--limit)"
    assert peak_mb < 400, f"peak RSS {peak_mb} MB"
    code, out, err, _, _ = run_sql(args, "SELECT range AS n FROM range(10)", "--format", "csv", "--limit", "3")
    assert (code, out.splitlines()) == (0, ["n", "0", "1", "2"]) and "first 3 are shown" in err
    code, out, err, _, _ = run_sql(args, "SELECT range AS n FROM range(3)", "--format", "csv", "--limit", "3")
    assert (code, out.splitlines(), err) == (0, ["n", "0", "1", "2"], "")
    assert sql(args, "SELECT 1", "--limit", "0") == 2


def test_a_fifo_in_the_lake_cannot_outlast_the_time_limit(warehouse, tmp_path):
    root, args = warehouse
    lake = tmp_path / "lake"
    shutil.copytree(root / "lake", lake)
    partition = next((lake / "logs").glob("*/*"))
    os.mkfifo(partition / "part-fifo.parquet")
    os.mkfifo(lake / "pipe.csv")
    args = [*args[:2], "--lake", str(lake)]
    for query in (f"SELECT * FROM read_csv('{lake}/pipe.csv')", f"SELECT * FROM read_text('{lake}/pipe.csv')",
                  f"SELECT count(*) FROM read_parquet('{partition}/part-fifo.parquet')"):
        code, out, err, _, seconds = run_sql(args, "--timeout", "2", query, timeout=60)
        assert code == 2 and err == "firstfault: <query>: field 'sql': stopped after 2 s (--timeout)\n", (query, err)
        assert seconds < 15, (query, seconds)
