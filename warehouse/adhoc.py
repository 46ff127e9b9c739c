"""`firstfault sql`: one read-only statement over the warehouse and the lake, on a connection DuckDB itself locks
down (docs/security.md). The warehouse is opened read-only; external access is off but for the local lake root, and
the configuration is locked so the query cannot undo either. Only a SELECT, or an EXPLAIN of one without ANALYZE,
runs: DuckDB's parser decides the statement's type, and an EXPLAIN is run as one built here from the SELECT it
explains, so no spelling of ANALYZE (which runs the statement: COPY, CREATE, CALL, VACUUM) reaches DuckDB. At most
`limit` rows come back, fetched as the query streams them. The whole query, from binding the lake's views to the
last row, runs within its time limit, so a reader never holds the warehouse long enough to fail a nightly load
waiting for it (store.WRITER_WAIT_S): DuckDB is interrupted at the limit, and a read blocked where no interrupt
reaches (a FIFO opened inside the lake) is left behind: QueryLeftBehind tells the caller to end the process without
closing DuckDB, whose teardown would wait for that read."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import duckdb

from firstfault.errors import BadInput
from firstfault.warehouse.store import connect_reader

QUERY = "<query>"
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 300.0  # the nightly writer waits longer than this for readers (store.WRITER_WAIT_S)
DEFAULT_LIMIT = 10_000
MAX_LIMIT = 1_000_000
# after the interrupt, how long a query gets to unwind before it is reported stopped and left behind
_INTERRUPT_GRACE_S = 1.0
_TOKEN = duckdb.token_type


class QueryLeftBehind(BadInput):
    """The query was stopped at its time limit, but a read it started is blocked where no interrupt reaches."""


@dataclass(frozen=True)
class Answer:
    names: list[str]
    rows: list[tuple]
    more: bool  # the query had rows beyond `limit`


def run_adhoc(path: str, sql: str, lake_root: str | None, timeout_s: float = DEFAULT_TIMEOUT_S,
              limit: int = DEFAULT_LIMIT) -> Answer:
    """The first `limit` rows of one read-only statement; BadInput for a refused, failing or stopped query
    (FileNotFoundError when the warehouse does not exist)."""
    con = connect_reader(path)
    outcome: list = []

    def work() -> None:
        try:
            outcome.append(_answer(con, sql, _local_folder(lake_root), limit))
        except BaseException as e:  # handed to the caller's thread
            outcome.append(e)

    # a daemon thread: one blocked in a system call must not keep the process from ending
    worker = threading.Thread(target=work, name="firstfault-sql", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        con.interrupt()
        worker.join(_INTERRUPT_GRACE_S)
    # closing the connection waits for every read it started: one blocked is left with it to the ending process
    stopped = f"stopped after {timeout_s:g} s (--timeout)"
    if worker.is_alive() or not _closed_within(con, _INTERRUPT_GRACE_S):
        raise QueryLeftBehind(QUERY, "sql", stopped)
    result = outcome[0]
    if isinstance(result, duckdb.InterruptException):
        raise BadInput(QUERY, "sql", stopped)
    if isinstance(result, duckdb.CatalogException):  # a table or column the warehouse lacks: say which file was opened
        raise BadInput(QUERY, "sql", f"{str(result).splitlines()[0].rstrip('!')} (warehouse {path})")
    if isinstance(result, duckdb.Error):
        raise BadInput(QUERY, "sql", str(result).splitlines()[0])
    if isinstance(result, BaseException):
        raise result
    return result


def _closed_within(con: duckdb.DuckDBPyConnection, wait_s: float) -> bool:
    closer = threading.Thread(target=con.close, name="firstfault-sql-close", daemon=True)
    closer.start()
    closer.join(wait_s)
    return not closer.is_alive()


def _answer(con: duckdb.DuckDBPyConnection, sql: str, lake: str | None, limit: int) -> Answer:
    # binding a view lists the table's files: only for queries that may name one
    _expose_lake(con, lake if "lake" in sql.lower() else None)
    _lock_down(con, lake)
    cursor = con.execute(_read_statement(con, sql))
    names = [d[0] for d in cursor.description] if cursor.description else []
    rows = cursor.fetchmany(limit + 1) if names else []
    return Answer(names, rows[:limit], len(rows) > limit)


def _read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement | str:
    """What runs for `sql`: its one SELECT statement, or for an EXPLAIN of one, an EXPLAIN built here of that SELECT
    (in the format it asked for); anything else is refused."""
    statement = _one_statement(con, sql)
    if statement.type == duckdb.StatementType.SELECT:
        return statement
    if statement.type != duckdb.StatementType.EXPLAIN:
        raise BadInput(QUERY, "sql", f"{statement.type.name} is refused: firstfault sql runs one read-only SELECT or EXPLAIN")
    explain_format, explained = _explain_parts(statement.query)
    inner = _one_statement(con, explained)
    if inner.type != duckdb.StatementType.SELECT:
        raise BadInput(QUERY, "sql", f"EXPLAIN of {inner.type.name} is refused: firstfault sql explains one SELECT")
    return f"EXPLAIN (FORMAT {explain_format}) {inner.query}"


def _one_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise BadInput(QUERY, "sql", str(e).splitlines()[0]) from None
    if len(statements) != 1:
        raise BadInput(QUERY, "sql", f"{len(statements)} statements: firstfault sql runs exactly one")
    return statements[0]


def _explain_parts(explain: str) -> tuple[str, str]:
    """(format, the statement it explains) of an EXPLAIN, read with DuckDB's tokenizer (comments and case are its
    business): only `EXPLAIN stmt` and `EXPLAIN (FORMAT name) stmt`; ANALYZE and every other option are refused."""
    tokens = duckdb.tokenize(explain)
    bounds = [pos for pos, _ in tokens[1:]] + [len(explain)]
    words = [(pos, explain[pos:end].strip(), kind) for (pos, kind), end in zip(tokens, bounds) if kind != _TOKEN.comment]
    if len(words) > 1 and words[1][1] == "(":
        close = next((i for i, (_, text, _) in enumerate(words) if text == ")"), len(words) - 1)
        option = [text.lower() for _, text, _ in words[2:close]]
        if len(option) != 2 or option[0] != "format" or not option[1].isalpha() or close + 1 >= len(words):
            raise BadInput(QUERY, "sql", "EXPLAIN with options other than (FORMAT name) is refused: "
                           "EXPLAIN ANALYZE runs the statement it explains")
        return option[1], explain[words[close + 1][0]:]
    if len(words) > 1 and words[1][1].lower() in ("analyze", "analyse"):
        raise BadInput(QUERY, "sql", "EXPLAIN ANALYZE is refused: it runs the statement it explains")
    return "text", explain[words[1][0]:] if len(words) > 1 else ""


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
    """Views lake.<table> over the readable generation of every partition of the Parquet lake (docs/tables.md);
    a table no attempt has rows of is an empty table of its columns. They live in an in-memory catalog: nothing is written to the warehouse, and the
    views go with the connection."""
    con.execute("ATTACH ':memory:' AS lake (READ_WRITE)")
    if lake is None:
        return
    # imported on use: fsspec and pyarrow, only for a query that names the lake
    from firstfault.lake import Lake
    from firstfault.schema import lake_schemas

    folder = Lake(lake)
    for table, schema in lake_schemas().items():
        files = folder.table_files(table)
        if not files:  # read_parquet cannot bind a view over no files: an empty table of the same columns
            con.register("no_rows", schema.empty_table())
            con.execute(f"CREATE TABLE lake.{table} AS SELECT *, NULL::VARCHAR AS day, NULL::VARCHAR AS attempt_key FROM no_rows")
            con.unregister("no_rows")
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
