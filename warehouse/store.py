"""The DuckDB warehouse: schema, idempotent loads by attempt, read-only queries that wait out a short write lock."""
from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

# Tables keyed by attempt that a load replaces, in load order.
ATTEMPT_TABLES = ("attributions", "attribution_evidence", "events", "connector_reports", "rule_hits")


def schema_sql() -> str:
    return (resources.files("firstfault.warehouse") / "schema.sql").read_text(encoding="utf-8")


def connect_writer(path: str) -> duckdb.DuckDBPyConnection:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(path)
    con.execute(schema_sql())
    return con


def load_attempts(path: str, tables: dict[str, pa.Table], catalog: pa.Table, run: dict) -> None:
    """Replace every row of the attempts in `tables` (one transaction, one short write lock)."""
    attempt_ids = pa.table({"attempt_id": tables["attributions"].column("attempt_id")})
    con = connect_writer(path)
    try:
        con.register("loaded_attempts", attempt_ids)
        con.execute("BEGIN TRANSACTION")
        for name in ATTEMPT_TABLES:
            con.execute(f"DELETE FROM {name} WHERE attempt_id IN (SELECT attempt_id FROM loaded_attempts)")
            con.register("incoming", tables[name])
            con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM incoming")
            con.unregister("incoming")
        con.register("incoming_catalog", catalog)
        con.execute("INSERT OR REPLACE INTO xid_catalog BY NAME SELECT * FROM incoming_catalog")
        con.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
            [run["run_id"], run["flow"], run["started_at"], run["finished_at"], run["attempts"], run["rules_version"], run["lake_root"]],
        )
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    finally:
        con.close()


def connect_reader(path: str, wait_s: float = 30.0) -> duckdb.DuckDBPyConnection:
    """Open read-only; while a writer holds the file, retry for up to wait_s (writes are short)."""
    if not Path(path).exists():
        raise FileNotFoundError(path)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            return duckdb.connect(path, read_only=True)
        except duckdb.IOException as e:
            if "lock" not in str(e).lower() or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
