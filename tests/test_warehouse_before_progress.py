"""A warehouse written by the version before the `progress` table keeps working.

tests/fixtures/warehouse_before_progress/ is that version's demo warehouse (firstfault 0.1.0 at 4da4b14), exported
with DuckDB's `EXPORT DATABASE ... (FORMAT parquet)`: its attempts have every progress marker as an event and the
warehouse has no `progress` table. Readers fall back to those events; a new load adds the table and its rows
beside the old attempts.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.run import run_attempts
from firstfault.synthetic.demo import write_demo
from firstfault.warehouse.read import workload_history

FIXTURE = Path(__file__).parent / "fixtures" / "warehouse_before_progress"
WORKLOAD = ("demo", "demo-time-limit")


@pytest.fixture
def old_warehouse(tmp_path) -> Path:
    path = tmp_path / "firstfault.duckdb"
    con = duckdb.connect(str(path))
    con.execute((FIXTURE / "schema.sql").read_text())
    for statement in (FIXTURE / "load.sql").read_text().splitlines():
        con.execute(statement.replace("FROM '", f"FROM '{FIXTURE.as_posix()}/"))
    con.close()
    return path


def _progress_events(path: Path, attempt_id: str) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT max(iteration) FROM events WHERE attempt_id = ? AND kind = 'progress'", [attempt_id]).fetchone()[0]
    finally:
        con.close()


def test_the_fixture_is_the_old_shape(old_warehouse):
    con = duckdb.connect(str(old_warehouse), read_only=True)
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    con.close()
    assert "progress" not in tables and {"attributions", "events"} <= tables


def test_history_reads_progress_events_of_a_warehouse_without_the_table(old_warehouse):
    rows = workload_history(str(old_warehouse), [WORKLOAD]).to_pylist()
    assert [r["attempt"] for r in rows] == [0]
    assert rows[0]["progress"] == _progress_events(old_warehouse, "demo/demo-time-limit/0") > 0


def test_a_new_load_adds_progress_beside_the_old_attempts(old_warehouse, tmp_path):
    """A requeue of an old workload, attributed by this version into the old warehouse: its progress comes from the
    new table, the old attempt's still from its events, and the requeue's action sees both."""
    spec = next(p for p in write_demo(tmp_path / "demo") if p.parent.name == "time-limit")
    ctx = dataclasses.replace(load_static_context(str(spec)), attempt=1)
    config = Config(lake=LakeSettings(root=str(tmp_path / "lake")), warehouse=WarehouseSettings(path=str(old_warehouse)))
    run_attempts([ctx], config, flow="test")

    rows = {r["attempt"]: r for r in workload_history(str(old_warehouse), [WORKLOAD]).to_pylist()}
    assert rows[0]["progress"] == _progress_events(old_warehouse, "demo/demo-time-limit/0")
    assert rows[1]["progress"] == rows[0]["progress"]  # the same log: the same highest iteration
    con = duckdb.connect(str(old_warehouse), read_only=True)
    try:
        by_attempt = dict(con.execute("SELECT attempt_id, count(*) FROM progress GROUP BY ALL").fetchall())
        markers = con.execute("SELECT count(*) FROM events WHERE attempt_id = ? AND kind = 'progress'", [ctx.attempt_id]).fetchone()[0]
    finally:
        con.close()
    assert set(by_attempt) == {ctx.attempt_id}
    assert markers <= 2  # the rank's first and last marker stay events; the rest are summarised


def test_report_and_sql_read_the_old_warehouse(old_warehouse, tmp_path):
    cli = [sys.executable, "-m", "firstfault.cli"]
    out = subprocess.run([*cli, "report", "--warehouse", str(old_warehouse), "--out", str(tmp_path / "report")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "report" / "attempts" / "demo" / "demo-time-limit" / "0.html").read_text()
    assert "Training progress" in page
    out = subprocess.run([*cli, "sql", "--warehouse", str(old_warehouse), "SELECT count(*) AS n FROM attributions"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "9" in out.stdout, out.stderr
