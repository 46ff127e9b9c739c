"""The DuckDB connection a rule pass runs on: a fresh one per run, or one kept warm across runs (the API), with the
reference tables (`register_reference`) registered once. A warm pass drops every temp table and view a run made
when the run ends, so nothing of one request is seen by the next."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from firstfault.config import AttributionSettings
from firstfault.rules_sql.engine import register_reference


@contextmanager
def fresh_rule_pass(settings: AttributionSettings, version: str, filesystem=None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A new in-memory connection with the reference tables (and `filesystem`, the lake's when not local), closed after."""
    con = _prepared(settings, version, filesystem)
    try:
        yield con
    finally:
        con.close()


class WarmRulePass:
    """One connection prepared once and lent to one run at a time."""

    def __init__(self, settings: AttributionSettings, version: str, filesystem=None):
        self._con = _prepared(settings, version, filesystem)
        # a request's rule pass is planning, not execution (a few ms of it): DuckDB's second thread only adds its own
        # scheduling (one thread: 10 % less CPU and wall per request on the 230 KB attempt); requests run one at a time
        self._con.execute("SET threads = 1")
        self._reference = _temp_relations(self._con)
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            try:
                yield self._con
            finally:
                self._forget_run()

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def _forget_run(self) -> None:
        made = _temp_relations(self._con) - self._reference
        for kind, name in sorted(made, key=lambda r: r[0] != "VIEW"):  # views first: they read the tables
            self._con.execute(f'DROP {kind} IF EXISTS temp."{name}"')


def _prepared(settings: AttributionSettings, version: str, filesystem) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")  # a pass is one process per core already; a second thread only costs
        if filesystem is not None:
            con.register_filesystem(filesystem)
        register_reference(con, settings, version)
    except BaseException:
        con.close()
        raise
    return con


def _temp_relations(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return set(con.execute("SELECT 'VIEW', view_name FROM duckdb_views() WHERE temporary AND NOT internal "
                           "UNION ALL SELECT 'TABLE', table_name FROM duckdb_tables() WHERE temporary").fetchall())
