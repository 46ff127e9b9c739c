"""The DuckDB warehouse: schema, idempotent loads by attempt, read-only queries that wait out a short write lock."""
from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

from firstfault.errors import WHERE_TO, BadInput
from firstfault.schema import ATTEMPT_TABLES, RUN_COLUMNS, xid_catalog_path


def schema_sql() -> str:
    return (resources.files("firstfault.warehouse") / "schema.sql").read_text(encoding="utf-8")


# longer than `firstfault sql` lets a query run (warehouse/adhoc.py MAX_TIMEOUT_S) plus its wait to open the file
WRITER_WAIT_S = 360.0


def connect_writer(path: str, wait_s: float = WRITER_WAIT_S) -> duckdb.DuckDBPyConnection:
    """Open for writing; while another process holds the file (a `firstfault sql` or `report` reader, say), retry for
    up to wait_s: readers are short (`firstfault sql` stops its queries in time), and a night's results must not be
    lost to one."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = _connect_waiting(path, read_only=False, wait_s=wait_s)
    try:
        version = schema_version()
        if _marked_version(con) != version:  # a new file, or one an older firstfault wrote
            # one transaction: a process killed while creating the schema leaves all of it or none of it, never a
            # warehouse without some of its tables
            con.execute("BEGIN TRANSACTION")
            con.execute(schema_sql())
            _add_struct_fields(con)
            con.execute("INSERT OR REPLACE INTO xid_catalog BY NAME SELECT * REPLACE (CAST(code AS BIGINT) AS code) "
                        f"FROM read_csv('{xid_catalog_path().as_posix()}', header = true, all_varchar = true)")
            con.execute(f"COMMENT ON TABLE runs IS '{version}'")
            con.execute("COMMIT")
    except BaseException:
        con.close()
        raise
    return con


def schema_version() -> str:
    """What the schema, the struct fields added since and the shipped Xid catalogue make; a warehouse marked with it
    (a comment on `runs`) needs none of them applied again."""
    digest = hashlib.sha256(schema_sql().encode() + repr(_ADDED_FIELDS).encode() + xid_catalog_path().read_bytes())
    return f"firstfault schema {digest.hexdigest()[:16]}"


def _marked_version(con: duckdb.DuckDBPyConnection) -> str | None:
    rows = con.execute("SELECT comment FROM duckdb_tables() WHERE database_name = current_database() "
                       "AND schema_name = 'main' AND table_name = 'runs'").fetchall()
    return rows[0][0] if rows else None


# fields added to the struct lists of `attributions` since warehouses were first written: (column, field, type)
_ADDED_FIELDS = (("evidence", "kinds", "VARCHAR[]"), ("symptoms", "uri", "VARCHAR"), ("symptoms", "line", "BIGINT"))


def _add_struct_fields(con: duckdb.DuckDBPyConnection) -> None:
    """A warehouse from before a field of _ADDED_FIELDS: its verdicts' lists gain the field (NULL), or every later
    load would drop it from the verdicts it stores (a struct column keeps only its own fields)."""
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_name = 'attributions'").fetchall())
    for column, name, sql_type in _ADDED_FIELDS:
        current = types.get(column)
        if current is not None and not re.search(rf'[(,] *"?{name}"? ', current):
            types[column] = f"{current.removesuffix(')[]')}, {name} {sql_type})[]"
            con.execute(f"ALTER TABLE attributions ALTER {column} SET DATA TYPE {types[column]} "
                        f"USING list_transform({column}, lambda e: struct_insert(e, {name} := NULL::{sql_type}))")


def load_attempts(path: str, tables: dict[str, Source] | Sequence[dict[str, Source]], run: dict,
                  failures: Sequence[dict] = (), filesystem=None,
                  read_back: Callable[[duckdb.DuckDBPyConnection], None] | None = None, checkpoint: bool = True) -> None:
    """Replace every row of the attempts in `tables` (one dict of ATTEMPT_TABLES, or several: one per shard) in one
    transaction (one short write lock), and record the run and its `failures` (rows of run_failures). A table is
    Arrow, or the URL of a Parquet file that DuckDB reads itself (a nightly shard's results: no copy through
    Python; `filesystem` is the fsspec filesystem of non-local URLs). `read_back` reads what the caller needs of
    the stored rows on the same connection once they are committed (the API's verdicts: no second open of the file).
    `checkpoint` off leaves the write-ahead log to the next load's checkpoint (a backfill's nights but its last): a
    checkpoint rewrites the changed tables' blocks, a cost that follows the warehouse's size, not the night's rows."""
    parts = [tables] if isinstance(tables, dict) else list(tables)
    con = connect_writer(path)
    try:
        if filesystem is not None:
            con.register_filesystem(filesystem)
        con.execute("BEGIN TRANSACTION")
        for part in parts:
            con.execute(f"CREATE OR REPLACE TEMP TABLE incoming_attempts AS SELECT attempt_id FROM {_relation(con, part['attributions'], 'incoming_attempts_source')}")
            # only attempts loaded before have rows to replace (a night's are mostly new): deleting by a list of
            # new ids would still scan every big table of the fleet's history
            con.execute("CREATE OR REPLACE TEMP TABLE loaded_attempts AS SELECT attempt_id FROM attributions "
                        "WHERE attempt_id IN (SELECT attempt_id FROM incoming_attempts)")
            replaced = con.execute("SELECT count(*) FROM loaded_attempts").fetchall()[0][0]
            for name in ATTEMPT_TABLES:
                if replaced:
                    con.execute(f"DELETE FROM {name} WHERE attempt_id IN (SELECT attempt_id FROM loaded_attempts)")
                con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM {_relation(con, part[name], 'incoming')}")
        columns = [c for c in RUN_COLUMNS if c in run]
        con.execute(f"INSERT OR REPLACE INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                    [run[c] for c in columns])
        for f in failures:
            con.execute("INSERT INTO run_failures VALUES (?, ?, ?, ?, ?, ?)",
                        [run["run_id"], f.get("attempt_id"), f.get("spec_uri"), f["stage"], f.get("error"), run["finished_at"]])
        con.execute("COMMIT")
        if checkpoint:
            con.execute("CHECKPOINT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    else:
        if read_back is not None:
            read_back(con)
    finally:
        con.close()


Source = pa.Table | str


def _relation(con: duckdb.DuckDBPyConnection, source: Source, name: str) -> str:
    """SQL naming `source`: an Arrow table registered as `name`, or a Parquet file read in place."""
    if isinstance(source, str):
        return "read_parquet('" + source.replace("'", "''") + "', hive_partitioning = false)"
    con.register(name, source)
    return name


class DamagedWarehouse(BadInput):
    """The warehouse file is there but cannot be used (truncated, not DuckDB's): the user's to restore, not a bug."""

    def __init__(self, path: str, problem: str):
        super().__init__(path, "warehouse", problem)


_HEADER_BYTES = 3 * 4096  # DuckDB's file starts with its main header and two database headers


def check_whole(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """DamagedWarehouse when the file is too short to hold the blocks in use (cut by a full disk or a partial copy):
    DuckDB would answer from the metadata it can read and fail only on the missing blocks. Checked once connected,
    when no other process writes the file; the free blocks DuckDB drops from the file's end are not counted."""
    [(total, free, block_bytes)] = con.execute("SELECT total_blocks, free_blocks, block_size FROM pragma_database_size()").fetchall()
    needed = _HEADER_BYTES + (total - free) * block_bytes
    size = os.path.getsize(path)
    if size < needed:
        con.close()
        raise DamagedWarehouse(path, f"truncated: {size} bytes, too few for its {total - free} blocks in use ({needed} "
                                     "bytes); restore it from a backup, or move it aside and attribute again")


def connect_reader(path: str, wait_s: float = 30.0) -> duckdb.DuckDBPyConnection:
    """Open read-only; while a writer holds the file, retry for up to wait_s (writes are short)."""
    if not Path(path).exists():
        raise FileNotFoundError(path)
    return _connect_waiting(path, read_only=True, wait_s=wait_s)


def _connect_waiting(path: str, *, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, retried with back-off while another process holds the file's lock."""
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only)
            check_whole(con, path)
            return con
        except duckdb.Error as e:
            locked = isinstance(e, duckdb.IOException) and "lock" in str(e).lower()
            if locked and time.monotonic() <= deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if any(m in str(e) for m in ("Read-only file system", "Permission denied")):
                raise BadInput(path, "warehouse", f"cannot write: {str(e).splitlines()[0].rsplit(': ', 1)[-1]}: {WHERE_TO}") from None
            if not locked and Path(path).is_file():  # a damaged or foreign file: the user's to replace, not a bug
                raise DamagedWarehouse(path, f"not a usable DuckDB file: {str(e).splitlines()[0]}") from None
            raise
