"""The lake's generations (docs/DESIGN.md §2): a landing's files become readable only once its completion markers
are written, readers take each partition's newest complete generation, older ones go after the commit; landing
touches only the attempt's own partitions; a failed or killed run keeps the earlier landing readable."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from firstfault.cli import main
from firstfault.config import LandingSettings
from firstfault.connectors.static_context import context_from_dict
from firstfault.lake import TABLES, DamagedPartition, Lake, new_generation
from firstfault.landing import land_attempt
from firstfault.transforms.extract import load_patterns
from firstfault.warehouse.adhoc import run_adhoc

from conftest import committed_generation, warehouse_rows

DAY, KEY = "2026-11-29", "c~2Fw~2F0"
XID = "Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"


def rows(lake: Lake, table: str = "logs", day: str = DAY, key: str = KEY) -> list:
    read = lake.read(table, day, key)
    return [] if read is None else read.column(0).to_pylist()


def one_column(values) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())})


def test_readers_take_the_newest_complete_generation_and_a_commit_removes_the_older(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    folder = tmp_path / "lake" / "logs" / f"day={DAY}" / f"attempt_key={KEY}"
    folder.mkdir(parents=True)
    import pyarrow.parquet as pq

    pq.write_table(one_column([0]), folder / "part-0.parquet")  # an older version's partition: generation 0
    assert rows(lake) == [0]
    legacy, first, second = new_generation(), new_generation(), new_generation()
    assert legacy < first < second
    pq.write_table(one_column([5]), folder / f"part-{legacy}-0.parquet")  # an older version's marker per partition
    assert rows(lake) == [0]
    (folder / f"_complete-{legacy}").write_bytes(b"")
    assert rows(lake) == [5]
    lake.write("logs", DAY, KEY, one_column([1]), one_column([]).schema, first)
    assert rows(lake) == [5]  # written, not committed: not read
    lake.commit(DAY, KEY, first)
    assert rows(lake) == [1] and sorted(p.name for p in folder.iterdir()) == [f"part-{first}-0.parquet"]
    assert [p.name for p in (tmp_path / "lake" / "commits" / f"day={DAY}" / f"attempt_key={KEY}").iterdir()] == [f"{first}.json"]
    lake.write("logs", DAY, KEY, one_column([2, 2]), one_column([]).schema, second)  # a run killed before its commit
    assert rows(lake) == [1]
    lake.write("logs", DAY, KEY, one_column([3]), one_column([]).schema)  # the next landing replaces and cleans
    assert rows(lake) == [3]
    assert len([p for p in folder.iterdir() if p.suffix == ".parquet"]) == 1


def test_one_marker_lists_the_files_of_the_tables_with_rows_and_a_table_without_rows_has_no_file(tmp_path, capsys):
    ctx = attempt_ctx(tmp_path)
    land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings())
    lake_root = tmp_path / "lake"
    (marker,) = (lake_root / "commits" / f"day={DAY}" / f"attempt_key={ctx.attempt_key}").iterdir()
    listed = json.loads(marker.read_text())["tables"]
    on_disk = {p.parts[-4]: [p.name] for p in lake_root.glob(f"*/day={DAY}/attempt_key={ctx.attempt_key}/*.parquet")}
    assert listed == on_disk and set(listed) == {"logs", "events", "context", "connector_reports"}
    assert not list(lake_root.glob("*/day=*/attempt_key=*/_complete-*"))  # no marker per partition
    assert Lake(str(lake_root)).read("metrics", DAY, ctx.attempt_key) is None
    from firstfault.warehouse.store import connect_writer

    connect_writer(str(tmp_path / "w.duckdb")).close()  # the empty tables still have their columns in SQL
    found = run_adhoc(str(tmp_path / "w.duckdb"), "SELECT count(*), count(metric) FROM lake.metrics", str(lake_root)).rows
    assert found == [(0, 0)]


def test_a_file_the_marker_lists_gone_is_a_damaged_partition_never_fewer_rows(tmp_path, capsys):
    (tmp_path / "attempt.yaml").write_text(json.dumps({
        "workload_id": "w", "cluster": "c", "state": "FAILED", "start": f"{DAY}T01:00:00Z", "end": f"{DAY}T02:00:00Z",
        "nodes": ["node-01"], "logs": [{"source": "syslog", "path": "{node}.log"}]}))
    ctx = attempt_ctx(tmp_path)
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    assert main(["attribute", "--static", str(tmp_path / "attempt.yaml"), *args]) == 0
    (gone,) = (tmp_path / "lake" / "events" / f"day={DAY}" / f"attempt_key={ctx.attempt_key}").glob("*.parquet")
    gone.unlink()
    lake = Lake(str(tmp_path / "lake"))
    with pytest.raises(DamagedPartition, match=re.escape(gone.name)):
        lake.read("events", DAY, ctx.attempt_key)
    assert rows(lake, "context", key=ctx.attempt_key)  # the other tables still read
    capsys.readouterr()
    assert main(["sql", *args, "SELECT count(*) FROM lake.events"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and gone.name in err and "damaged" in err, err


def test_sql_lake_views_read_the_committed_generation_only(tmp_path):
    from firstfault.warehouse.store import connect_writer

    connect_writer(str(tmp_path / "w.duckdb")).close()
    lake = Lake(str(tmp_path / "lake"))
    lake.write("logs", DAY, KEY, one_column([1]), one_column([]).schema)
    lake.write("logs", DAY, "other", one_column([7]), one_column([]).schema)
    lake.write("logs", DAY, KEY, one_column([2, 2]), one_column([]).schema, new_generation())  # never committed
    found = run_adhoc(str(tmp_path / "w.duckdb"), "SELECT attempt_key, x FROM lake.logs ORDER BY ALL", str(tmp_path / "lake")).rows
    assert found == [(KEY, 1), ("other", 7)]


class CountingFS:
    """An fsspec filesystem that records every call that touches storage (name, path; one per path of a list)."""

    PURE = {"unstrip_protocol", "_strip_protocol", "protocol", "sep", "root_marker"}

    def __init__(self, fs):
        self._fs, self.calls = fs, []

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if name in self.PURE or not callable(attr):
            return attr

        def recorded(*args, **kwargs):
            paths = args[0] if args and isinstance(args[0], list) else args[:1]
            self.calls.extend((name, str(path)) for path in paths)
            return attr(*args, **kwargs)

        return recorded


def attempt_ctx(root: Path, workload: str = "w"):
    (root / "node-01.log").write_text(XID)
    doc = {"workload_id": workload, "cluster": "c", "start": f"{DAY}T01:00:00Z", "end": f"{DAY}T02:00:00Z", "nodes": ["node-01"],
           "logs": [{"source": "syslog", "path": "{node}.log"}]}
    return context_from_dict(doc, str(root / "attempt.yaml"), str(root))


def landing_calls(lake_root: Path, ctx) -> list[tuple[str, str]]:
    lake = Lake(str(lake_root))
    lake.fs = CountingFS(lake.fs)
    land_attempt(ctx, lake, load_patterns(), LandingSettings())
    return [(name, re.sub(r"g\d{8}T\d{12}[0-9a-f]{6}", "<gen>", path.replace(str(lake_root), "<lake>"))) for name, path in lake.fs.calls]


def test_landing_touches_the_table_folders_once_and_then_only_its_own_partitions(tmp_path):
    """The filesystem calls of landing and re-landing an attempt are the same in a lake of 1 other attempt as in
    one of 240 over 6 days: no glob or listing of the lake, only the root's folders and the attempt's partitions."""
    ctx = attempt_ctx(tmp_path)
    calls = {}
    for days, per_day in ((1, 1), (6, 40)):
        lake_root = tmp_path / f"lake-{days * per_day}"
        filler = Lake(str(lake_root))
        for d in range(days):
            for a in range(per_day):
                generation = new_generation()
                for table in TABLES:
                    filler.write(table, f"2026-11-{d + 1:02d}", f"other~2F{a}", one_column([a]), one_column([]).schema, generation)
                filler.commit(f"2026-11-{d + 1:02d}", f"other~2F{a}", generation)
        calls[days * per_day] = [landing_calls(lake_root, ctx), landing_calls(lake_root, ctx)]
        assert len([f for f in (lake_root / "logs" / f"day={DAY}" / f"attempt_key={ctx.attempt_key}").iterdir()
                    if f.suffix == ".parquet"]) == 1
    assert calls[1] == calls[240]
    own = f"<lake>/{{}}/day={DAY}/attempt_key={ctx.attempt_key}"
    for name, path in calls[240][1]:
        assert name not in ("glob", "find", "walk", "du"), (name, path)
        assert path == "<lake>" or any(path.startswith(own.format(t)) for t in (*TABLES, "commits")), (name, path)
    counted = Counter(name for name, _ in calls[240][1])
    assert counted["ls"] == 1 + len(TABLES) + 1  # the root once, then each of the attempt's partitions and its markers
    assert counted["pipe_file"] == 1  # one completion marker for the attempt
    # the tables it has rows of, one file each: metrics and flight recorder have none
    written = [name for name, path in calls[240][1] if name == "open"]
    assert len(written) == 4 and not any("/metrics/" in p or "/flight_recorder/" in p for _, p in calls[240][1] if _ == "open")


def test_the_rule_pass_lists_only_the_days_at_hand(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        for key in ("a", "b"):
            lake.write("events", day, key, one_column([1]), one_column([]).schema)
    lake.fs = CountingFS(lake.fs)
    assert len(lake.partition_files("events", [("2026-11-02", "a"), ("2026-11-02", "b")])) == 2
    assert [(n, p.rsplit("/", 2)[-2:]) for n, p in lake.fs.calls[:2]] == [("find", ["events", "day=2026-11-02"]),
                                                                         ("find", ["commits", "day=2026-11-02"])]
    assert sorted(p.rsplit("/", 3)[-3] for n, p in lake.fs.calls[2:] if n == "cat") == ["day=2026-11-02"] * 2  # its markers
    lake.fs.calls.clear()
    assert len(lake.partition_files("progress", [("2026-11-02", "a"), ("2026-11-02", "b")])) == 0
    assert [n for n, _ in lake.fs.calls] == ["find", "find"]  # markers are read once per Lake


# Runs `firstfault` with the landing held at a point (the test then kills it with SIGKILL): the child writes the
# file named by its first argument when it gets there.
HELD_RUN = """
import sys, time
from firstfault import landing, lake
from firstfault.cli import main

def held(original):
    def wait(*args, **kwargs):
        open(sys.argv[1], "w").close()
        time.sleep(600)
    return wait

point = sys.argv[2]
if point == "commit":  # every file of the new generation written, none of its markers
    lake.Lake.commit = held(lake.Lake.commit)
else:  # the new generation's logs written, its other tables not yet
    landing._land_metrics = held(landing._land_metrics)
sys.exit(main(sys.argv[3:]))
"""


def kill_during_landing(point: str, args: list[str], ready: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", HELD_RUN, str(ready), point, *args], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert child.poll() is None, f"the run ended ({child.returncode}) before it reached {point}"
            assert time.monotonic() < deadline, f"the run did not reach {point}"
            time.sleep(0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL


def verdict(warehouse: Path) -> list[dict]:
    return warehouse_rows(warehouse, "SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, input_fingerprint FROM attributions")


def lake_logs(args: list[str], capsys) -> list[str]:
    capsys.readouterr()
    assert main(["sql", *args, "--format", "csv", "SELECT uri, line, raw FROM lake.logs ORDER BY uri, line"]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("point", ["metrics", "commit"])
def test_a_run_killed_while_landing_keeps_the_earlier_landing_and_the_next_run_replaces_it(tmp_path, point, capsys):
    ctx = attempt_ctx(tmp_path)
    (tmp_path / "attempt.yaml").write_text(json.dumps({
        "workload_id": "w", "cluster": "c", "state": "FAILED", "start": f"{DAY}T01:00:00Z", "end": f"{DAY}T02:00:00Z",
        "nodes": ["node-01"], "logs": [{"source": "syslog", "path": "{node}.log"}]}))
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    attribute = ["attribute", "--static", str(tmp_path / "attempt.yaml"), *args]
    assert main(attribute) == 0
    lake = Lake(str(tmp_path / "lake"))
    before = {t: lake.read(t, DAY, ctx.attempt_key) for t in TABLES}
    files_before = lake.files("logs", DAY, ctx.attempt_key)
    logs_before, verdict_before = lake_logs(args, capsys), verdict(tmp_path / "w.duckdb")

    (tmp_path / "node-01.log").write_text(XID + "Nov 29 01:11:00 node-01 kernel: a line the killed run lands\n")
    kill_during_landing(point, attribute, tmp_path / "ready")
    assert lake.files("logs", DAY, ctx.attempt_key) == files_before
    assert {t: lake.read(t, DAY, ctx.attempt_key) for t in TABLES} == before
    assert lake_logs(args, capsys) == logs_before
    assert verdict(tmp_path / "w.duckdb") == verdict_before  # the warehouse still tells what the lake holds
    partition = tmp_path / "lake" / "logs" / f"day={DAY}" / f"attempt_key={ctx.attempt_key}"
    assert len(list(partition.glob("part-*.parquet"))) == 2  # the killed run's files are there, unread

    assert main(attribute) == 0  # the next run replaces the earlier landing and removes the killed one's files
    after = lake_logs(args, capsys)
    assert len(after) == len(logs_before) + 1 and "a line the killed run lands" in after[-1]
    generation = committed_generation(partition)
    for table in TABLES:
        folder = tmp_path / "lake" / table / f"day={DAY}" / f"attempt_key={ctx.attempt_key}"
        assert [p.name for p in folder.glob("*")] in ([], [f"part-{generation}-0.parquet"]), table


def failing_source_spec(root: Path, *paths: dict) -> Path:
    (root / "node-01.log").write_text(XID)
    spec = root / "attempt.yaml"
    spec.write_text(json.dumps({
        "workload_id": "w", "cluster": "c", "state": "FAILED", "start": f"{DAY}T01:00:00Z", "end": f"{DAY}T02:00:00Z",
        "nodes": ["node-01"], "logs": [{"source": "syslog", "path": "{node}.log"}, *paths]}))
    return spec


def reports(warehouse: Path) -> dict[str, dict]:
    return {r["uri"]: r for r in warehouse_rows(warehouse, "SELECT uri, status, reason FROM connector_reports")}


def test_an_unreachable_source_is_a_report_and_the_verdict_goes_on(tmp_path):
    spec = failing_source_spec(tmp_path, {"source": "applog", "path": "ftp://127.0.0.1:1/x"})
    doc = json.loads(spec.read_text())
    spec.write_text(json.dumps({**doc, "metrics": ["ftp://127.0.0.1:1/m.csv"], "flight_recorder": ["ftp://127.0.0.1:1/fr/*"]}))
    args = ["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    assert main(args) == 0
    found = reports(tmp_path / "w.duckdb")
    for uri in ("ftp://127.0.0.1:1/x", "ftp://127.0.0.1:1/m.csv", "ftp://127.0.0.1:1/fr/*"):
        assert found[uri]["status"] == "error" and "ConnectionRefusedError" in found[uri]["reason"], found[uri]
    (verdict,) = warehouse_rows(tmp_path / "w.duckdb", "SELECT verdict, subdomain FROM attributions")
    assert verdict == {"verdict": "attributed", "subdomain": "gpu_lost"}


def test_a_glob_past_its_limits_is_reported_and_not_read(tmp_path):
    for i in range(30):
        (tmp_path / "many" / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "many" / f"d{i % 3}" / f"f{i}.log").write_text("x\n")
    spec = failing_source_spec(tmp_path, {"source": "applog", "path": "many/**/*.log"}, {"source": "applog", "path": "many/d0/f0.log"},
                               {"source": "applog", "path": "/usr/**"})
    config = tmp_path / "firstfault.toml"
    config.write_text("[landing]\nmax_glob_files = 10\n")
    args = ["attribute", "--config", str(config), "--static", str(spec), "--lake", str(tmp_path / "lake"),
            "--warehouse", str(tmp_path / "w.duckdb")]
    assert main(args) == 0
    found = reports(tmp_path / "w.duckdb")
    assert found["many/**/*.log"]["status"] == "error" and "more than 10 files" in found["many/**/*.log"]["reason"]
    assert found["/usr/**"]["status"] == "error" and "more than 10 files" in found["/usr/**"]["reason"]
    assert found[(tmp_path / "many" / "d0" / "f0.log").as_uri()]["status"] == "ok"
    logs = Lake(str(tmp_path / "lake")).read("logs", DAY, KEY)
    assert sorted(set(logs.column("uri").to_pylist())) == sorted([(tmp_path / "node-01.log").as_uri(), (tmp_path / "many/d0/f0.log").as_uri()])

    config.write_text("[landing]\nglob_seconds = 0.0\n")  # no time to walk a folder: a plain path needs no walk
    assert main(args) == 0
    found = reports(tmp_path / "w.duckdb")
    assert found["many/**/*.log"]["status"] == "error" and "glob_seconds" in found["many/**/*.log"]["reason"]
    assert found[(tmp_path / "many" / "d0" / "f0.log").as_uri()]["status"] == "ok"
