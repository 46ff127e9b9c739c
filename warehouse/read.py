"""The warehouse's read side, used by the CLI, the API, the report, the nightly skip query, history and scoring:
every read opens a read-only connection (waiting out a short write lock) and closes it again."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from firstfault.schema import VERDICT_KEYS
from firstfault.warehouse.store import connect_reader


@contextmanager
def reading(path: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the warehouse at `path` (FileNotFoundError when it does not exist)."""
    con = connect_reader(path)
    try:
        yield con
    finally:
        con.close()


def query(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict]:
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def existing_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def table_columns(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [name]).fetchall()]


# --- verdicts -----------------------------------------------------------------------------------------------------

def load_verdicts(con: duckdb.DuckDBPyConnection, attempt_ids: Sequence[str] | None = None) -> list[dict]:
    """Verdict objects (docs/verdict.md) of `attempt_ids` (default: all), ordered by attempt id."""
    where = ""
    params: list = []
    if attempt_ids is not None:
        where = "WHERE attempt_id IN (SELECT unnest(?))"
        params = [list(attempt_ids)]
    # a warehouse no writer of this version has opened yet lacks the newer keys' columns: they read as null
    present = {name for name, _ in table_columns(con, "attributions")}
    columns = ", ".join(k if k in present else f"NULL AS {k}" for k in VERDICT_KEYS)
    return [_verdict(row) for row in query(con, f"SELECT {columns} FROM attributions {where} ORDER BY attempt_id", params)]


def _verdict(row: dict) -> dict:
    verdict = {k: row[k] for k in VERDICT_KEYS}
    for item in verdict["evidence"] or []:
        locator = item.pop("locator", None)
        if locator:
            item["locator"] = json.loads(locator)
    return verdict


def stored_verdicts(path: str, attempt_ids: Sequence[str]) -> list[dict]:
    """The verdicts of `attempt_ids` as the warehouse at `path` holds them."""
    with reading(path) as con:
        return load_verdicts(con, attempt_ids)


def verdict_summaries(path: str) -> list[tuple]:
    """(attempt_id, verdict, domain, subdomain, culprit_nodes, confidence) of every attempt (scoring against a truth
    file)."""
    with reading(path) as con:
        return con.execute("SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, quality.confidence FROM attributions").fetchall()


# --- the report ---------------------------------------------------------------------------------------------------

def report_attempts(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """Every verdict with the attempt's window, GPU model and nodes."""
    verdicts = {v["attempt_id"]: v for v in load_verdicts(con)}
    extra = query(con, "SELECT attempt_id, start_ts, end_ts, gpu_model, nodes FROM attributions ORDER BY attempt_id")
    for row in extra:
        verdicts[row["attempt_id"]].update(row)
    return [verdicts[r["attempt_id"]] for r in extra]


def attempt_evidence(con: duckdb.DuckDBPyConnection, attempt_id: str) -> list[dict]:
    return query(con, "SELECT * FROM attribution_evidence WHERE attempt_id = ? ORDER BY position", [attempt_id])


def context_events(con: duckdb.DuckDBPyConnection, attempt_id: str) -> list[dict]:
    """Events with a role that the evidence list does not already carry (shown grey on the timeline)."""
    return query(con, """
        SELECT e.event_id, e.kind, e.node, e.rank, e.ts, e.role, e.uri, e.line, e.raw AS text FROM events e
        WHERE e.attempt_id = ? AND e.role IS NOT NULL AND e.role <> 'ignored'
          AND e.event_id NOT IN (SELECT event_id FROM attribution_evidence WHERE attempt_id = ? AND event_id IS NOT NULL)
        ORDER BY e.ts NULLS LAST, e.uri, e.line, e.event_id""", [attempt_id, attempt_id])


# --- incremental runs and history ---------------------------------------------------------------------------------

def unchanged_attempts(path: str, fingerprints: dict[str, str], version: str) -> set[str]:
    """Attempt ids (keys of `fingerprints`) whose warehouse row has this rules_version and this input fingerprint."""
    try:
        with reading(path) as con:
            rows = con.execute("SELECT attempt_id, rules_version, input_fingerprint FROM attributions "
                               "WHERE attempt_id IN (SELECT unnest(?))", [list(fingerprints)]).fetchall()
    except FileNotFoundError:
        return set()
    except duckdb.Error:  # a warehouse from before input_fingerprint: redo everything
        return set()
    return {a for a, v, f in rows if (v, f) == (version, fingerprints[a])}


_EVENTS_PROGRESS = "(SELECT max(e.iteration) FROM events e WHERE e.attempt_id = {a}.attempt_id AND e.kind = 'progress')"


def attempt_progress_sql(con: duckdb.DuckDBPyConnection, alias: str) -> str:
    """SQL for the highest completed iteration of the attempt `alias` names: from `progress`, or from the `progress`
    events of an attempt an earlier version loaded (it has no `progress` rows; its warehouse may have no such table)."""
    from_events = _EVENTS_PROGRESS.format(a=alias)
    if "progress" not in existing_tables(con):
        return from_events
    return f"coalesce((SELECT max(p.max_iteration) FROM progress p WHERE p.attempt_id = {alias}.attempt_id), {from_events})"


def progress_points(con: duckdb.DuckDBPyConnection, attempt_id: str) -> list[dict]:
    """An attempt's training progress over time (node, rank, ts, iteration): the last marker of each rank and minute
    (`progress`), or each marker of an attempt an earlier version loaded (its `progress` events)."""
    if "progress" in existing_tables(con):
        rows = query(con, "SELECT node, rank, last_ts AS ts, last_iteration AS iteration FROM progress WHERE attempt_id = ? "
                          "AND last_ts IS NOT NULL AND last_iteration IS NOT NULL ORDER BY node, rank, ts", [attempt_id])
        if rows:
            return rows
    return query(con, "SELECT node, rank, ts, iteration FROM events WHERE attempt_id = ? AND kind = 'progress' "
                      "AND ts IS NOT NULL AND iteration IS NOT NULL ORDER BY node, rank, ts", [attempt_id])


def _read_with(path: str, wanted_columns: str, wanted: Sequence[tuple],
               select: Callable[[duckdb.DuckDBPyConnection], pa.Table]) -> pa.Table | None:
    """`select` on the warehouse, with the temp table `wanted` (`wanted_columns`) holding the rows asked about; None when
    the warehouse cannot be read (no history is never a failed attribution)."""
    try:
        con = connect_reader(path)
    except Exception:  # noqa: BLE001 - missing, locked past the wait or corrupt: no history
        return None
    try:
        con.execute(f"CREATE TEMP TABLE wanted ({wanted_columns})")
        con.executemany(f"INSERT INTO wanted VALUES ({', '.join('?' for _ in wanted_columns.split(','))})", list(wanted))
        return select(con)
    except duckdb.Error:
        return None
    finally:
        con.close()


def gpu_xid_history(path: str, wanted: Sequence[tuple], codes: Sequence[int]) -> pa.Table | None:
    """The Xids of `codes` that earlier attempts logged on the wanted GPUs (the kernel's or DCGM's report), as rows of the
    `gpu_xid_history` relation:
    `wanted` rows are (cluster, node, gpu, since, until): Xids stamped since `since` of attempts that ended before
    `until`. Only those nodes' Xid rows are read (the filters reach the scan), never the whole history."""
    nodes = sorted({w[1] for w in wanted})
    since = min(w[3] for w in wanted)
    family = f"e.code IN ({', '.join(str(int(c)) for c in sorted(set(codes)))})"
    return _read_with(path, "cluster VARCHAR, node VARCHAR, gpu VARCHAR, since TIMESTAMP, until TIMESTAMP", wanted, lambda con: con.sql(
        "WITH xids AS (SELECT * FROM events e WHERE e.kind IN ('xid', 'dcgm_xid') AND e.gpu IS NOT NULL AND " + family + " AND "
        f"e.node IN ({', '.join('?' for _ in nodes)}) AND e.ts >= ?), "
        "hits AS (SELECT a.cluster, a.workload_id, e.attempt_id, e.node, e.gpu, min(e.ts) AS ts, "
        "CAST(any_value(a.end_ts) AS TIMESTAMP) AS end_ts FROM xids e JOIN attributions a USING (attempt_id) "
        "JOIN wanted w ON w.cluster = a.cluster AND w.node = e.node AND w.gpu = e.gpu "
        "WHERE e.ts >= w.since AND a.end_ts < w.until GROUP BY ALL), "
        "spread AS (SELECT e.attempt_id, count(DISTINCT (e.node, e.gpu)) AS gpus FROM events e "
        "WHERE e.attempt_id IN (SELECT attempt_id FROM hits) AND e.kind IN ('xid', 'dcgm_xid') AND e.gpu IS NOT NULL AND " + family + " "
        "GROUP BY ALL) "
        "SELECT h.*, s.gpus FROM hits h JOIN spread s USING (attempt_id) ORDER BY ALL",
        params=[*nodes, since]).to_arrow_table())


def workload_history(path: str, workloads: Sequence[tuple[str, str]]) -> pa.Table | None:
    """Earlier verdicts of the (cluster, workload_id) pairs as rows of the `history` relation."""
    return _read_with(path, "cluster VARCHAR, workload_id VARCHAR", workloads, lambda con: con.sql(
        "SELECT a.attempt_id, a.workload_id, a.cluster, CAST(a.attempt AS BIGINT) AS attempt, a.verdict, a.domain, a.subdomain, "
        "CAST(a.culprit_nodes AS VARCHAR[]) AS culprit_nodes, "
        f"{attempt_progress_sql(con, 'a')} AS progress, "
        "CAST(a.start_ts AS TIMESTAMP) AS start_ts "
        "FROM attributions a JOIN wanted USING (cluster, workload_id) ORDER BY a.attempt_id"
    ).to_arrow_table())
