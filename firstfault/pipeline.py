"""The plain functions a run is made of; flows only wire them (land -> attribute -> load)."""
from __future__ import annotations

import multiprocessing
import os
import uuid
from concurrent.futures import ProcessPoolExecutor
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa

from firstfault.attribution import catalog_path, load_rules, register_reference, rules_version, run_rules
from firstfault.config import Config
from firstfault.connectors.lake import Lake
from firstfault.connectors.registry import source_connectors
from firstfault.connectors.static_context import AttemptContext
from firstfault.landing import LandingResult, input_bytes, land_attempt, land_attempts
from firstfault.errors import BadInput
from firstfault.transforms.extract import PatternError, load_patterns
from firstfault.warehouse.store import load_attempts


@dataclass
class AttributionTables:
    tables: dict[str, pa.Table]
    rules_version: str


def land(contexts: Sequence[AttemptContext], config: Config, pattern_dirs: Sequence[Path] | None = None, *,
         on_error: Callable[[AttemptContext, Exception], None] | None = None, parallel: bool = True) -> list[LandingResult]:
    """Land every attempt. Big inputs use several processes (each attempt is landed whole by one of them) unless
    `parallel` is off (the caller already runs on every core); small ones are landed together, which shares
    the fixed cost of event extraction. `on_error(ctx, exc)` receives each attempt that fails (then left out);
    without it the first failure propagates. `pattern_dirs` (default: the config's `[patterns] dirs`) are merged
    after the built-in patterns."""
    dirs = config.patterns.dirs if pattern_dirs is None else pattern_dirs
    try:
        patterns = load_patterns([Path(d) for d in dirs])
    except PatternError as e:
        raise BadInput(", ".join(map(str, dirs)) or "built-in patterns", "patterns", str(e)) from None
    sources = source_connectors(config)
    workers = _landing_workers(contexts, config.landing) if parallel else 1
    if workers <= 1:
        lake = Lake(config.lake.root, config.lake.storage_options())
        return land_attempts(contexts, lake, patterns, config.landing, sources, on_error)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_land_one, ctx, config, patterns, sources) for ctx in contexts]
        results = []
        for ctx, future in zip(contexts, futures):
            try:
                results.append(future.result())
            except Exception as e:
                if on_error is None:
                    raise
                on_error(ctx, e)
        return results


def _land_one(ctx: AttemptContext, config: Config, patterns, sources) -> LandingResult:
    return land_attempt(ctx, Lake(config.lake.root, config.lake.storage_options()), patterns, config.landing, sources)


# Below this much input a second process costs more (interpreter and imports) than it saves.
_PARALLEL_MIN_BYTES = 256 * 1024 * 1024


def _landing_workers(contexts: Sequence[AttemptContext], settings) -> int:
    if settings.workers:
        return min(settings.workers, len(contexts))
    if len(contexts) < 2:
        return 1
    total = sum(input_bytes(ctx) for ctx in contexts)
    return min(os.cpu_count() or 1, len(contexts)) if total >= _PARALLEL_MIN_BYTES else 1


def attribute(contexts: Sequence[AttemptContext], config: Config, rule_dirs: Sequence[Path] | None = None,
              history: Sequence[dict] | None = None, fingerprints: dict[str, str | None] | None = None) -> AttributionTables:
    """Run every rule (built-in, then `rule_dirs`, default the config's `[rules] dirs`) over the landed events of all
    `contexts` in one DuckDB pass. `history` (rows of HISTORY_COLUMNS) replaces the warehouse as the record of earlier
    attempts when given (fixtures); otherwise the warehouse is read when it exists."""
    lake = Lake(config.lake.root, config.lake.storage_options())
    rules = load_rules([Path(d) for d in (config.rules.dirs if rule_dirs is None else rule_dirs)])
    version = rules_version(rules, [Path(d) for d in config.patterns.dirs])
    con = duckdb.connect()
    try:
        if not lake.is_local:
            con.register_filesystem(lake.fs)
        _register_lake(con, lake, contexts)
        register_reference(con, config.attribution, version)
        register_history(con, config, history)
        run_rules(con, rules)
        tables = {
            "attributions": con.sql(
                "SELECT v.*, a.day, a.start_ts, a.end_ts, a.gpu_model, a.gpus_per_node, a.nodes FROM verdict_rows v "
                "JOIN attempts a USING (attempt_id) ORDER BY attempt_id"
            ).to_arrow_table(),
            "attribution_evidence": con.sql(
                "SELECT attempt_id, CAST(row_number() OVER (PARTITION BY attempt_id ORDER BY "
                "CASE role WHEN 'root_cause' THEN 0 WHEN 'corroboration' THEN 1 WHEN 'confirmation' THEN 2 ELSE 3 END, "
                "ts NULLS LAST, uri, line) AS INTEGER) AS position, role, rule_id, event_id, kind, node, rank, source, uri, line, ts, "
                "text, locator FROM evidence_rows ORDER BY attempt_id, position"
            ).to_arrow_table(),
            "events": con.sql(
                "SELECT e.*, r.role FROM events_all e LEFT JOIN ("
                "  SELECT attempt_id, event_id, arg_min(role, CASE role WHEN 'root' THEN 0 WHEN 'confirmation' THEN 1 "
                "  WHEN 'symptom' THEN 2 ELSE 3 END) AS role FROM rule_hits WHERE event_id IS NOT NULL GROUP BY ALL"
                ") r USING (attempt_id, event_id) ORDER BY attempt_id, event_id"
            ).to_arrow_table(),
            "connector_reports": con.sql("SELECT * FROM reports ORDER BY attempt_id, connector, source, uri").to_arrow_table(),
            "rule_hits": con.sql("SELECT * FROM rule_hits ORDER BY attempt_id, rule_id, event_id, role").to_arrow_table(),
        }
    finally:
        con.close()
    # input_fingerprint (firstfault/inputs.py): `fingerprints` by attempt_id when the caller has them (nightly)
    from firstfault.inputs import safe_input_fingerprint

    by_id = {c.attempt_id: c for c in contexts}
    known = fingerprints or {}
    values = [known[i] if i in known else (safe_input_fingerprint(by_id[i]) if i in by_id else None)
              for i in tables["attributions"].column("attempt_id").to_pylist()]
    tables["attributions"] = tables["attributions"].append_column("input_fingerprint", pa.array(values, pa.string()))
    return AttributionTables(tables, version)


HISTORY_COLUMNS = (
    "attempt_id VARCHAR, workload_id VARCHAR, cluster VARCHAR, attempt BIGINT, verdict VARCHAR, domain VARCHAR, "
    "subdomain VARCHAR, culprit_nodes VARCHAR[], progress BIGINT, start_ts TIMESTAMP"
)


def register_history(con: duckdb.DuckDBPyConnection, config: Config, rows: Sequence[dict] | None = None) -> None:
    """The `history` relation (docs/DESIGN.md §4.3): verdicts of earlier attempts of the workloads being attributed,
    from the warehouse (read-only) or from `rows`. The attempts of this run are added by _action.sql itself, which
    also derives every root's fingerprint (the root_fingerprint macro of _views.sql)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE history ({HISTORY_COLUMNS})")
    if rows is not None:
        names = [c.split()[0] for c in HISTORY_COLUMNS.split(", ")]
        for row in rows:
            con.execute(f"INSERT INTO history ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
                        [row.get(n) for n in names])
        return
    path = Path(config.warehouse.path)
    if not path.exists():
        return
    from firstfault.warehouse.store import connect_reader

    try:
        wh = connect_reader(str(path))
    except Exception:  # an unreadable warehouse means no history, never a failed attribution
        return
    try:
        keys = con.sql("SELECT DISTINCT cluster, workload_id FROM attempts").fetchall()
        if not keys:
            return
        wh.execute("CREATE TEMP TABLE wanted (cluster VARCHAR, workload_id VARCHAR)")
        wh.executemany("INSERT INTO wanted VALUES (?, ?)", keys)
        table = wh.sql(
            "SELECT a.attempt_id, a.workload_id, a.cluster, CAST(a.attempt AS BIGINT) AS attempt, a.verdict, a.domain, a.subdomain, "
            "CAST(a.culprit_nodes AS VARCHAR[]) AS culprit_nodes, "
            "(SELECT max(e.iteration) FROM events e WHERE e.attempt_id = a.attempt_id AND e.kind = 'progress') AS progress, "
            "CAST(a.start_ts AS TIMESTAMP) AS start_ts "
            "FROM attributions a JOIN wanted USING (cluster, workload_id)"
        ).to_arrow_table()
    except duckdb.Error:
        return
    finally:
        wh.close()
    con.register("history_warehouse", table)
    con.execute("INSERT INTO history SELECT * FROM history_warehouse WHERE attempt_id NOT IN (SELECT attempt_id FROM attempts)")
    con.unregister("history_warehouse")


def _register_lake(con: duckdb.DuckDBPyConnection, lake: Lake, contexts: Sequence[AttemptContext]) -> None:
    # tables, not views: every rule reads them, and a view re-reads the shard's Parquet files for each rule
    # (attribute took twice as long)
    for table, view in (("events", "events_all"), ("context", "attempts_raw"), ("inputs", "reports"), ("metrics", "metrics"),
                        ("flight_recorder", "flight_recorder")):
        files = [f for ctx in contexts for f in lake.files(table, ctx.day, ctx.attempt_key)]
        if not files:
            raise FileNotFoundError(f"nothing landed in {lake.root}/{table} for the requested attempts")
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {view} AS SELECT * EXCLUDE (day, attempt_key) FROM read_parquet([{listed}], "
                    "hive_partitioning = true, hive_types = {'day': VARCHAR, 'attempt_key': VARCHAR}, union_by_name = true)")
    con.execute("CREATE OR REPLACE TEMP TABLE attempts AS SELECT *, strftime(start_ts, '%Y-%m-%d') AS day FROM attempts_raw")


def load(config: Config, result: AttributionTables, flow: str, started_at: datetime, attempts: int) -> None:
    catalog = duckdb.sql(f"SELECT * REPLACE (CAST(code AS BIGINT) AS code) FROM read_csv('{catalog_path().as_posix()}', header = true, all_varchar = true)").to_arrow_table()
    run = {
        "run_id": uuid.uuid4().hex, "flow": flow, "started_at": started_at.replace(tzinfo=None),
        "finished_at": datetime.now(timezone.utc).replace(tzinfo=None), "attempts": attempts,
        "rules_version": result.rules_version, "lake_root": config.lake.root,
    }
    load_attempts(config.warehouse.path, result.tables, catalog, run)


def attribute_and_store(contexts: Sequence[AttemptContext], config: Config, *, flow: str, started_at: datetime) -> AttributionTables:
    result = attribute(contexts, config)
    load(config, result, flow, started_at, len(contexts))
    return result


def run_static(spec_contexts: Sequence[AttemptContext], config: Config, flow: str = "attribute-attempt") -> AttributionTables:
    """Land, attribute and load without Prefect (the same functions the flow's tasks call)."""
    started_at = datetime.now(timezone.utc)
    land(spec_contexts, config)
    return attribute_and_store(spec_contexts, config, flow=flow, started_at=started_at)
