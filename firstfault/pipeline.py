"""The plain functions a run is made of; flows only wire them (land -> attribute -> load)."""
from __future__ import annotations

import multiprocessing
import os
import uuid
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa

from firstfault.attribution import catalog_path, load_rules, register_reference, rules_version, run_rules
from firstfault.config import Config
from firstfault.connectors.lake import Lake
from firstfault.connectors.static_context import AttemptContext
from firstfault.landing import LandingResult, input_bytes, land_attempt
from firstfault.transforms.extract import load_patterns
from firstfault.warehouse.store import load_attempts


@dataclass
class AttributionTables:
    tables: dict[str, pa.Table]
    rules_version: str


def land(contexts: Sequence[AttemptContext], config: Config, pattern_dirs: Sequence[Path] = ()) -> list[LandingResult]:
    """Land every attempt; big runs use several processes (each attempt is landed whole by one of them)."""
    patterns = load_patterns(pattern_dirs)
    workers = _landing_workers(contexts, config.landing)
    if workers <= 1:
        lake = Lake(config.lake.root)
        return [land_attempt(ctx, lake, patterns, config.landing) for ctx in contexts]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_land_one, contexts, repeat(config), repeat(patterns)))


def _land_one(ctx: AttemptContext, config: Config, patterns) -> LandingResult:
    return land_attempt(ctx, Lake(config.lake.root), patterns, config.landing)


# Below this much input a second process costs more (interpreter and imports) than it saves.
_PARALLEL_MIN_BYTES = 256 * 1024 * 1024


def _landing_workers(contexts: Sequence[AttemptContext], settings) -> int:
    if settings.workers:
        return min(settings.workers, len(contexts))
    if len(contexts) < 2:
        return 1
    total = sum(input_bytes(ctx) for ctx in contexts)
    return min(os.cpu_count() or 1, len(contexts)) if total >= _PARALLEL_MIN_BYTES else 1


def attribute(contexts: Sequence[AttemptContext], config: Config, rule_dirs: Sequence[Path] = ()) -> AttributionTables:
    """Run every rule over the landed events of all `contexts` in one DuckDB pass."""
    lake = Lake(config.lake.root)
    rules = load_rules(rule_dirs)
    version = rules_version(rules)
    con = duckdb.connect()
    try:
        if not lake.is_local:
            con.register_filesystem(lake.fs)
        _register_lake(con, lake, contexts)
        register_reference(con, config.attribution, version)
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
    return AttributionTables(tables, version)


def _register_lake(con: duckdb.DuckDBPyConnection, lake: Lake, contexts: Sequence[AttemptContext]) -> None:
    for table, view in (("events", "events_all"), ("context", "attempts_raw"), ("inputs", "reports"), ("metrics", "metrics")):
        files = [f for ctx in contexts for f in lake.files(table, ctx.day, ctx.attempt_key)]
        if not files:
            raise FileNotFoundError(f"nothing landed in {lake.root}/{table} for the requested attempts")
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * EXCLUDE (day, attempt_key) FROM read_parquet([{listed}], "
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
