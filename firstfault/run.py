"""The plain functions a run is made of; flows only wire them (land -> attribute -> load)."""
from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa

from firstfault import progress
from firstfault.config import Config
from firstfault.connectors.fingerprint import safe_input_fingerprint
from firstfault.connectors.local_files import log_bytes
from firstfault.connectors.registry import source_connectors
from firstfault.connectors.static_context import AttemptContext
from firstfault.errors import BadInput
from firstfault.lake import Lake
from firstfault.landing import LandingResult, land_attempt, land_attempts
from firstfault.rules_sql.engine import Rule, load_rules, rules_version, run_rules
from firstfault.rules_sql.gpu_history import register_gpu_history
from firstfault.rules_sql.prepared import WarmRulePass, fresh_rule_pass
from firstfault.schema import HISTORY_COLUMNS, lake_schemas
from firstfault.stages import stage
from firstfault.workers import process_pool
from firstfault.transforms.extract import PatternError, load_patterns
from firstfault.warehouse.read import workload_history
from firstfault.warehouse.store import load_attempts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuleSet:
    """The rules of a run, loaded once, and the rules_version they and the pattern folders make."""
    rules: list[Rule]
    version: str


def load_rule_set(config: Config) -> RuleSet:
    """The built-in rules, then the config's `[rules] dirs`."""
    rules = load_rules([Path(d) for d in config.rules.dirs])
    return RuleSet(rules, rules_version(rules, config.attribution, [Path(d) for d in config.patterns.dirs]))


@dataclass
class AttributionTables:
    tables: dict[str, pa.Table]
    rules_version: str


def land(contexts: Sequence[AttemptContext], config: Config, pattern_dirs: Sequence[Path] | None = None, *,
         on_error: Callable[[AttemptContext, Exception], None] | None = None, parallel: bool = True,
         keep_bytes: int = 0, lake: Lake | None = None) -> list[LandingResult]:
    """Land every attempt. Big inputs use several processes (each attempt is landed whole by one of them) unless
    `parallel` is off (the caller already runs on every core); small ones are landed together, which shares
    the fixed cost of event extraction. `on_error(ctx, exc)` receives each attempt that fails (then left out);
    without it the first failure propagates. `pattern_dirs` (default: the config's `[patterns] dirs`) are merged
    after the built-in patterns. `keep_bytes`: see `land_attempts` (one process only). `lake`: the run's (default:
    the config's, built now)."""
    dirs = config.patterns.dirs if pattern_dirs is None else pattern_dirs
    try:
        patterns = load_patterns([Path(d) for d in dirs])
    except PatternError as e:
        raise BadInput(", ".join(map(str, dirs)) or "built-in patterns", "patterns", str(e)) from None
    sources = source_connectors(config)
    sizes = [log_bytes(ctx) for ctx in contexts] if parallel and len(contexts) > 1 else []
    workers = _landing_workers(len(contexts), sum(sizes), config.landing) if parallel else 1
    lake = lake or config_lake(config)
    if workers <= 1:  # one process lands them; a big application log is landed in parts by one process per core
        part_workers = (config.landing.workers or os.cpu_count() or 1) if parallel else 1
        # the caller's processes already fill the cores: a second unit in flight would only hold memory
        settings = config.landing if parallel else replace(config.landing, units_in_flight=1)
        return _logged(land_attempts(contexts, lake, patterns, settings, sources, on_error, part_workers, keep_bytes), lake)
    # big inputs only get here: worth a progress line, and their sizes were just listed to choose the workers
    with progress.stage("land", total=len(contexts)) as landed, process_pool(workers) as pool:
        futures = [pool.submit(_land_one, ctx, config, patterns, sources) for ctx in contexts]
        results = []
        for ctx, size, future in zip(contexts, sizes, futures):
            try:
                results.append(future.result())
            except Exception as e:
                if on_error is None:
                    raise
                on_error(ctx, e)
            landed.advance(1, size)
        return _logged(results, lake)


def config_lake(config: Config) -> Lake:
    """The lake of `config` (`[lake] root` and its storage options)."""
    return Lake(config.lake.root, config.lake.storage_options())


def _logged(results: list[LandingResult], lake: Lake) -> list[LandingResult]:
    """`-v`: what each attempt landed, and where."""
    for r in results:
        log.info("land: %s: %d lines, %d events, %d metric rows from %d inputs into %s", r.attempt_id, r.log_rows,
                 r.event_rows, r.metric_rows, len(r.reports), lake.root)
    return results


def _land_one(ctx: AttemptContext, config: Config, patterns, sources) -> LandingResult:
    """One attempt in one of the pool's processes (one per core: one unit in flight each)."""
    settings = replace(config.landing, units_in_flight=1)
    return land_attempt(ctx, config_lake(config), patterns, settings, sources)


# Below this much input a second process costs more (interpreter and imports) than it saves.
_PARALLEL_MIN_BYTES = 256 * 1024 * 1024


def _landing_workers(attempts: int, total_bytes: int, settings) -> int:
    if settings.workers:
        return min(settings.workers, attempts)
    if attempts < 2:
        return 1
    return min(os.cpu_count() or 1, attempts) if total_bytes >= _PARALLEL_MIN_BYTES else 1


def attribute(contexts: Sequence[AttemptContext], config: Config, rules: RuleSet | None = None,
              history: Sequence[dict] | None = None, gpu_history: Sequence[dict] | None = None, fingerprints: dict[str, str | None] | None = None,
              warm: WarmRulePass | None = None, landed: dict[str, dict[str, pa.Table]] | None = None,
              lake: Lake | None = None) -> AttributionTables:
    """Run every rule of `rules` (default: the config's, loaded now) over the landed events of all `contexts` in one
    DuckDB pass, on `warm`'s connection when given (made from the same config and rules). `history` (rows of
    HISTORY_COLUMNS) replaces the warehouse as the record of earlier attempts when given (fixtures); otherwise the
    warehouse is read when it exists; `gpu_history` (rows of rules_sql/gpu_history.py's columns) likewise. `landed` (the landing's kept `tables` by attempt id) spares reading the lake
    again when it holds every one of `contexts`. `lake`: the run's (default: the config's, built now)."""
    lake = lake or config_lake(config)
    rules = rules or load_rule_set(config)
    version = rules.version
    with warm.connection() if warm else fresh_rule_pass(config.attribution, version, lake_filesystem(lake)) as con:
        _register_lake(con, lake, contexts, landed)
        register_history(con, config, history)
        register_gpu_history(con, config.warehouse.path, config.attribution.gpu_history_days, gpu_history)
        run_rules(con, rules.rules)
        tables = {
            "attributions": con.sql(
                "SELECT v.*, a.day, a.start_ts, a.end_ts, a.gpu_model, a.gpus_per_node, a.nodes FROM verdict_rows v "
                "JOIN attempts a USING (attempt_id) ORDER BY attempt_id"
            ).to_arrow_table(),
            "attribution_evidence": con.sql(
                "SELECT attempt_id, CAST(row_number() OVER (PARTITION BY attempt_id ORDER BY "
                "CASE role WHEN 'root_cause' THEN 0 WHEN 'corroboration' THEN 1 WHEN 'confirmation' THEN 2 ELSE 3 END, "
                "ts NULLS LAST, uri, line, event_id) AS INTEGER) AS position, role, rule_id, event_id, kind, kinds, node, rank, source, uri, line, ts, "
                "text, locator FROM evidence_rows ORDER BY attempt_id, position"
            ).to_arrow_table(),
            "events": con.sql(
                "SELECT e.*, r.role FROM events_all e LEFT JOIN ("
                "  SELECT attempt_id, event_id, arg_min(role, CASE role WHEN 'root' THEN 0 WHEN 'confirmation' THEN 1 "
                "  WHEN 'symptom' THEN 2 ELSE 3 END) AS role FROM rule_hits WHERE event_id IS NOT NULL GROUP BY ALL"
                ") r USING (attempt_id, event_id) ORDER BY attempt_id, event_id"
            ).to_arrow_table(),
            "progress": con.sql("SELECT * FROM progress ORDER BY attempt_id, uri, node, rank, minute").to_arrow_table(),
            "connector_reports": con.sql("SELECT * FROM reports ORDER BY attempt_id, connector, source, uri").to_arrow_table(),
            "rule_hits": con.sql("SELECT * FROM rule_hits ORDER BY attempt_id, rule_id, event_id, role").to_arrow_table(),
        }
    # input_fingerprint (connectors/fingerprint.py): `fingerprints` by attempt_id when the caller has them (nightly)
    by_id = {c.attempt_id: c for c in contexts}
    known = fingerprints or {}
    values = [known[i] if i in known else (safe_input_fingerprint(by_id[i]) if i in by_id else None)
              for i in tables["attributions"].column("attempt_id").to_pylist()]
    tables["attributions"] = tables["attributions"].append_column("input_fingerprint", pa.array(values, pa.string()))
    return AttributionTables(tables, version)


def lake_filesystem(lake: Lake):
    """What a DuckDB connection must register to read the lake: its fsspec filesystem unless local."""
    return None if lake.is_local else lake.fs


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
    keys = con.sql("SELECT DISTINCT cluster, workload_id FROM attempts ORDER BY ALL").fetchall()
    table = workload_history(config.warehouse.path, keys) if keys and Path(config.warehouse.path).exists() else None
    if table is None:
        return
    con.register("history_warehouse", table)
    con.execute("INSERT INTO history SELECT * FROM history_warehouse WHERE attempt_id NOT IN (SELECT attempt_id FROM attempts)")
    con.unregister("history_warehouse")


def _register_lake(con: duckdb.DuckDBPyConnection, lake: Lake, contexts: Sequence[AttemptContext],
                   landed: dict[str, dict[str, pa.Table]] | None = None) -> None:
    # tables, not views: every rule reads them, and a view re-reads the shard's Parquet files for each rule
    # (attribute took twice as long)
    ids = list(dict.fromkeys(ctx.attempt_id for ctx in contexts))
    in_memory = landed is not None and all(landed.get(i) for i in ids)
    for table, view in (("events", "events_all"), ("progress", "progress"), ("context", "attempts_raw"), ("connector_reports", "reports"),
                        ("metrics", "metrics"), ("flight_recorder", "flight_recorder")):
        if in_memory:  # the rows just written, in the order the lake's files would give them
            con.register("landed_rows", pa.concat_tables([landed[i][table] for i in ids], promote_options="permissive"))
            con.execute(f"CREATE OR REPLACE TEMP TABLE {view} AS SELECT * FROM landed_rows")
            con.unregister("landed_rows")
            continue
        files = lake.partition_files(table, [(ctx.day, ctx.attempt_key) for ctx in contexts])
        if not files and table == "context":  # every landed attempt has its context row
            raise FileNotFoundError(f"nothing landed in {lake.root}/{table} for the requested attempts")
        if not files:  # no attempt has rows of the table: no file to read its columns from
            con.register("landed_rows", lake_schemas()[table].empty_table())
            con.execute(f"CREATE OR REPLACE TEMP TABLE {view} AS SELECT * FROM landed_rows")
            con.unregister("landed_rows")
            continue
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {view} AS SELECT * EXCLUDE (day, attempt_key) FROM read_parquet([{listed}], "
                    "hive_partitioning = true, hive_types = {'day': VARCHAR, 'attempt_key': VARCHAR}, union_by_name = true)")
    con.execute("CREATE OR REPLACE TEMP TABLE attempts AS SELECT *, strftime(start_ts, '%Y-%m-%d') AS day FROM attempts_raw")


def store(config: Config, result: AttributionTables, flow: str, started_at: datetime, attempts: int,
          read_back: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> None:
    """Replace the attempts' rows in the warehouse and record the run (`read_back`: see load_attempts)."""
    run = {
        "run_id": uuid.uuid4().hex, "flow": flow, "started_at": started_at.replace(tzinfo=None),
        "finished_at": datetime.now(timezone.utc).replace(tzinfo=None), "attempts": attempts,
        "rules_version": result.rules_version, "lake_root": config.lake.root,
    }
    load_attempts(config.warehouse.path, result.tables, run, read_back=read_back)
    log.info("load: %d attempt%s into %s", attempts, "" if attempts == 1 else "s", config.warehouse.path)


def run_attempts(contexts: Sequence[AttemptContext], config: Config, *, flow: str, rules: RuleSet | None = None,
                 write_lock: AbstractContextManager = nullcontext(), warm: WarmRulePass | None = None,
                 read_back: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> AttributionTables:
    """The run path of an on-demand run (CLI, API, the attempt flow, the simulator): land, attribute, store.
    `write_lock` is held around the warehouse write only (the API lets readers go on while it attributes)."""
    started_at = datetime.now(timezone.utc)
    land(contexts, config)
    with stage("rules"):
        result = attribute(contexts, config, rules, warm=warm)
    with write_lock, stage("load"):
        store(config, result, flow, started_at, len(contexts), read_back)
    return result
