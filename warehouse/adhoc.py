"""`firstfault sql`: one read-only statement over the warehouse and the lake, on a connection DuckDB itself locks
down (docs/security.md). The warehouse is opened read-only; external access is off but for the local lake root, and
the configuration is locked so the query cannot undo either; only SELECT and EXPLAIN run (ATTACH, COPY, EXPORT,
SET, LOAD, INSTALL, PRAGMA, CALL, DDL and DML are refused before they run, also where the lock-down alone would let
them write inside the lake); a timer interrupts a query that runs past its time limit, so a reader never holds the
warehouse long enough to fail a nightly load waiting for it (store.WRITER_WAIT_S)."""
from __future__ import annotations

import os
import threading

import duckdb

from firstfault.errors import BadInput
from firstfault.warehouse.store import connect_reader

QUERY = "<query>"
READ_STATEMENTS = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 300.0  # the nightly writer waits longer than this for readers (store.WRITER_WAIT_S)


def run_adhoc(path: str, sql: str, lake_root: str | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[list[str], list[tuple]]:
    """Column names and rows of one read-only statement; BadInput for a refused, failing or stopped query
    (FileNotFoundError when the warehouse does not exist)."""
    con = connect_reader(path)
    try:
        lake = _local_folder(lake_root)
        # binding a view lists the table's files: only for queries that may name one
        _expose_lake(con, lake if "lake" in sql.lower() else None)
        _lock_down(con, lake)
        statement = _one_read_statement(con, sql)
        timer = threading.Timer(timeout_s, con.interrupt)
        timer.start()
        try:
            cursor = con.execute(statement)
            names = [d[0] for d in cursor.description] if cursor.description else []
            return names, cursor.fetchall() if names else []
        except duckdb.InterruptException:
            raise BadInput(QUERY, "sql", f"stopped after {timeout_s:g} s (--timeout)") from None
        except duckdb.Error as e:
            raise BadInput(QUERY, "sql", str(e).splitlines()[0]) from None
        finally:
            timer.cancel()
    finally:
        con.close()


def _one_read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise BadInput(QUERY, "sql", str(e).splitlines()[0]) from None
    if len(statements) != 1:
        raise BadInput(QUERY, "sql", f"{len(statements)} statements: firstfault sql runs exactly one")
    statement = statements[0]
    if statement.type not in READ_STATEMENTS:
        raise BadInput(QUERY, "sql", f"{statement.type.name} is refused: firstfault sql runs one read-only SELECT or EXPLAIN")
    return statement


def _local_folder(lake_root: str | None) -> str | None:
    """The lake root as an absolute local folder; None for object-store lakes (they are not exposed)."""
    if not lake_root:
        return None
    if lake_root.startswith("file://"):
        lake_root = lake_root[len("file://"):]
    if "://" in lake_root:
        return None
    return os.path.abspath(os.path.expanduser(lake_root))


def _expose_lake(con: duckdb.DuckDBPyConnection, lake: str | None) -> None:
    """Views lake.<table> over the readable generation of every partition of the Parquet lake (docs/tables.md),
    for the tables that have files. They live in an in-memory catalog: nothing is written to the warehouse, and the
    views go with the connection."""
    con.execute("ATTACH ':memory:' AS lake (READ_WRITE)")
    if lake is None:
        return
    from firstfault.lake import TABLES, Lake  # fsspec and pyarrow: only for a query that names the lake

    folder = Lake(lake)
    for table in TABLES:
        files = folder.table_files(table)
        if not files:  # read_parquet cannot bind a view over no files
            continue
        listed = ", ".join(_literal(f.removeprefix("file://")) for f in files)
        con.execute(f"CREATE VIEW lake.{table} AS SELECT * FROM read_parquet([{listed}], hive_partitioning = true, "
                    "hive_types = {'day': VARCHAR, 'attempt_key': VARCHAR})")


def _lock_down(con: duckdb.DuckDBPyConnection, lake: str | None) -> None:
    # order matters: the allowed directories can only be set while external access is still on
    folders = [lake.rstrip("/") + "/"] if lake else []
    con.execute(f"SET allowed_directories = [{', '.join(_literal(f) for f in folders)}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
