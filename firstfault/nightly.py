"""The nightly fleet run as plain functions (flows/nightly.py only wires them): discover the attempts that ended on
a UTC day in a catalog of static contexts, skip the unchanged ones, land + attribute them shard by shard (each shard
writes its result tables as Parquet into the lake and returns the folder), then load every shard's results into the
warehouse in one transaction (single writer) and rebuild the fleet aggregates.

Failure isolation: an attempt whose spec is malformed, whose inputs cannot be read or whose attribution raises is
recorded in `run_failures` (and logged as a warning); the other attempts of the night go on.
"""
from __future__ import annotations

import logging
import math
import os
import posixpath
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from firstfault import progress
from firstfault.config import Config
from firstfault.connectors.catalog import (
    Candidate,
    catalog_patterns,
    check_catalog,
    discover,
    discover_scheduled,
    nearest_days,
)
from firstfault.connectors.static_context import load_static_context
from firstfault.errors import BadInput, describe
from firstfault.lake import Lake
from firstfault.run import attribute, config_lake, lake_filesystem, land, load_rule_set
from firstfault.rules_sql.prepared import WarmRulePass
from firstfault.schema import ATTEMPT_TABLES, RUN_FAILURE_SCHEMA, run_failure
from firstfault.warehouse.fleet import rebuild
from firstfault.warehouse.night_lock import nightly_lock
from firstfault.warehouse.read import unchanged_attempts
from firstfault.workers import process_pool
from firstfault.warehouse.store import load_attempts

log = logging.getLogger(__name__)


@dataclass
class Plan:
    run_id: str
    run_date: str
    found: int
    todo: list[Candidate]
    skipped: list[Candidate]
    shards: list[list[Candidate]]
    failures: list[dict] = field(default_factory=list)  # discovery failures (malformed specs, unreadable inputs)
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    nearest: list[tuple[date, int]] = field(default_factory=list)  # the closest days with attempts, when found == 0


def default_run_date(now: datetime | None = None) -> date:
    """Yesterday in UTC."""
    return ((now or datetime.now(timezone.utc)).astimezone(timezone.utc) - timedelta(days=1)).date()


def parse_run_date(value: str | date | None, flag: str = "--date") -> date:
    if value is None or value == "":
        return default_run_date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BadInput(flag, flag.lstrip("-"), f"not a YYYY-MM-DD date: {value!r}") from None


def current_rules_version(config: Config) -> str:
    return load_rule_set(config).version


_ATTEMPTS_PER_SHARD = 250


def make_shards(candidates: Sequence[Candidate], shards: int = 0) -> list[list[Candidate]]:
    """Split into at most `shards` shards (0 = automatic), keeping the attempts of one workload together (their
    history then reads the same whatever the shard count) and balancing attempt counts. Deterministic."""
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for c in sorted(candidates, key=lambda c: c.attempt_id):
        groups.setdefault((c.cluster, c.workload_id), []).append(c)
    if not groups:
        return []
    if shards <= 0:
        # a DuckDB rule pass costs ~0.4 s plus ~20 ms per attempt and a shard's process start-up more, so shards
        # are big; a few per core still balance the cores and bound what one failed shard loses
        shards = max(os.cpu_count() or 1, math.ceil(len(candidates) / _ATTEMPTS_PER_SHARD))
    n = min(shards, len(groups))
    out: list[list[Candidate]] = [[] for _ in range(n)]
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        min(out, key=len).extend(groups[key])
    return [sorted(s, key=lambda c: c.attempt_id) for s in out]


def plan_nights(config: Config, days: Sequence[date], catalog: str | None = None, force: bool = False, shards: int = 0,
                first_run_id: str | None = None) -> list[Plan]:
    """One plan per day (attempts that ended on it, unchanged ones dropped unless `force`, the rest sharded); the
    catalog is read once for all days. Spec failures go with the first night, which gets `first_run_id` when given."""
    started_at = datetime.now(timezone.utc)
    check_catalog(config, catalog)
    patterns = catalog_patterns(config, catalog)
    scheduled, failures_by_day, schedulers = {}, {}, 0
    for day in days:
        scheduled[day], failures_by_day[day], schedulers = discover_scheduled(config, day)
    if not patterns and not schedulers:
        raise BadInput("--catalog", "catalog", "nothing to discover: pass --catalog DIR_OR_URL, set [catalog] paths "
                       "or configure a scheduler ([slurm], [kueue]) in firstfault.toml")
    by_day, spec_failures, ended = discover(patterns, days, [s for d in days for s in scheduled[d]], config.api)
    version = current_rules_version(config)
    plans = []
    for i, day in enumerate(days):
        candidates = by_day[day]
        done = set() if force else unchanged_attempts(config.warehouse.path, {c.attempt_id: c.fingerprint for c in candidates}, version)
        todo = [c for c in candidates if c.attempt_id not in done]
        skipped = [c for c in candidates if c.attempt_id in done]
        failures = failures_by_day[day] + (spec_failures if i == 0 else [])
        plans.append(Plan((first_run_id if i == 0 else None) or uuid.uuid4().hex, day.isoformat(), len(candidates), todo, skipped,
                          make_shards(todo, shards or config.schedule.shards), failures, started_at,
                          [] if candidates else nearest_days(ended, day)))
    return plans


def night_range(since: str | date | None, until: str | date | None) -> list[date]:
    """The UTC days from `since` to `until` (inclusive; `until` defaults to yesterday)."""
    first, last = parse_run_date(since, "--since"), parse_run_date(until, "--until")
    if first > last:
        raise BadInput("--since", "since", f"{first} is after --until {last}")
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


_OWNER = "warehouse"  # file in a run's results folder naming the warehouse the run loads into


def claim_results(config: Config, run_id: str) -> None:
    """Remove the results folders that earlier runs of this warehouse left in the lake when they died before loading
    them (kill -9, a lost machine), and mark this run's folder as this warehouse's. Call it holding the warehouse's
    nightly lock: then no live run owns one of those folders. Runs of other warehouses sharing the lake are left alone."""
    lake = config_lake(config)
    owner = os.path.abspath(config.warehouse.path)
    for folder in lake.fs.glob(lake.path("results", "run=*")):
        marker = posixpath.join(folder, _OWNER)
        try:
            with lake.fs.open(marker, "rt", encoding="utf-8") as f:
                dead = f.read() == owner
        except (FileNotFoundError, UnicodeDecodeError):
            dead = False
        if dead:
            log.warning("nightly: removing %s, left by a run that did not finish", lake.fs.unstrip_protocol(folder))
            lake.fs.rm(folder, recursive=True)
    folder = lake.path("results", f"run={run_id}")
    lake.fs.makedirs(folder, exist_ok=True)
    with lake.fs.open(posixpath.join(folder, _OWNER), "wt", encoding="utf-8") as f:
        f.write(owner)


# a shard's landed rule inputs kept in memory for its rule pass, at most (more: the rule pass reads them from the lake)
_KEPT_BYTES = 64 << 20


def run_shard(index: int, candidates: Sequence[Candidate], config: Config, run_id: str) -> str:
    """Land and attribute one shard, one attempt's failure never the shard's; write the result tables and the
    failures as Parquet under <lake>/results/run=<run_id>/shard=<index>/ and return that folder's URL."""
    failures: list[dict] = []
    contexts = []
    for c in candidates:
        try:
            contexts.append(load_static_context(c.spec_uri, config.api))
        except Exception as e:  # noqa: BLE001 - a spec changed or vanished since discovery
            failures.append(run_failure(c.attempt_id, c.spec_uri, "land", describe(e)))

    def land_failed(ctx, e: Exception) -> None:  # corrupt input, connector error
        failures.append(run_failure(ctx.attempt_id, ctx.spec_uri, "land", describe(e)))

    # shards already run side by side, so the attempts of one shard are landed in this process; the rule pass
    # takes the tables just landed from memory rather than from the lake (when they are small enough to keep)
    lake = config_lake(config)  # the shard's one lake: landing, the rule pass and the result tables share its listings
    tables = {r.attempt_id: r.tables for r in land(contexts, config, on_error=land_failed, parallel=False, keep_bytes=_KEPT_BYTES,
                                                   lake=lake)}
    landed = [ctx for ctx in contexts if ctx.attempt_id in tables]
    fingerprints = {c.attempt_id: c.fingerprint for c in candidates}
    rules = load_rule_set(config)
    warm = _warm_rule_pass(config, rules.version, lake)
    parts = []
    if landed:
        try:
            parts.append(attribute(landed, config, rules, fingerprints=fingerprints, warm=warm, landed=tables, lake=lake).tables)
        except Exception:  # noqa: BLE001 - find the attempt that breaks it; attribute the others one by one
            for ctx in landed:
                try:
                    parts.append(attribute([ctx], config, rules, fingerprints=fingerprints, warm=warm, landed=tables,
                                           lake=lake).tables)
                except Exception as e:  # noqa: BLE001
                    failures.append(run_failure(ctx.attempt_id, ctx.spec_uri, "attribute", describe(e)))
    for f in failures:
        log.warning("nightly: %s (%s) failed at %s: %s", f["attempt_id"], f["spec_uri"], f["stage"], f["error"])
    folder = lake.path("results", f"run={run_id}", f"shard={index}")
    if lake.fs.exists(folder):
        lake.fs.rm(folder, recursive=True)
    lake.fs.makedirs(folder, exist_ok=True)
    if parts:
        for name in ATTEMPT_TABLES:
            table = pa.concat_tables([p[name] for p in parts], promote_options="permissive")
            _write(lake, posixpath.join(folder, f"{name}.parquet"), table)
    _write(lake, posixpath.join(folder, "failures.parquet"), pa.Table.from_pylist(failures, schema=RUN_FAILURE_SCHEMA))
    return lake.fs.unstrip_protocol(folder)


_WARM = threading.local()


def _warm_rule_pass(config: Config, version: str, lake: Lake) -> WarmRulePass:
    """This thread's rule pass connection, its reference tables registered once for every shard it runs (per thread:
    Prefect's thread pool runs shards side by side, and a warm pass lends its connection to one run at a time). One
    per thread, replaced when the config or the rules change: a long-lived process does not pile them up. `lake`: the
    config's (the shard's)."""
    key = (repr(config.attribution), version, config.lake.root, repr(config.lake.storage_options()))
    held = getattr(_WARM, "held", None)
    if held is None or held[0] != key:
        if held is not None:
            held[1].close()
        _WARM.held = (key, WarmRulePass(config.attribution, version, lake_filesystem(lake)))
    return _WARM.held[1]


def load_results(shard_urls: Sequence[str], plan: Plan, config: Config, flow: str = "nightly",
                 extra_failures: Sequence[dict] = (), last: bool = True, rebuild_after: bool = False) -> dict:
    """The single writer: every shard's tables into the warehouse in one transaction, the run and its failures
    recorded; then the fleet aggregates (`firstfault.warehouse.fleet.rebuild`, when that module is installed). Returns the
    summary (counts, failures and the ids of the attempts attributed: `--output` writes their verdicts). A backfill's
    nights but its `last` leave the checkpoint and the fleet aggregates to it (they cost the warehouse's whole
    history, not the night's rows); `rebuild_after`: an earlier night attributed attempts, so the last rebuilds."""
    lake = config_lake(config)
    parts, attributions, failures = [], [], list(plan.failures) + list(extra_failures)
    for url in shard_urls:
        folder = lake.fs._strip_protocol(url)
        names = {posixpath.basename(p) for p in lake.fs.ls(folder, detail=False)}
        if "failures.parquet" in names:
            failures.extend(_read(lake, posixpath.join(folder, "failures.parquet")).to_pylist())
        if all(f"{n}.parquet" in names for n in ATTEMPT_TABLES):
            # the warehouse reads the shard's files itself; only the small attributions table passes through here
            parts.append({n: lake.fs.unstrip_protocol(posixpath.join(folder, f"{n}.parquet")) for n in ATTEMPT_TABLES})
            attributions.append(_read(lake, posixpath.join(folder, "attributions.parquet")).select(["attempt_id", "verdict"]))
    verdicts = Counter(v for a in attributions for v in a.column("verdict").to_pylist())
    attributed = sum(verdicts.values())
    run = {
        "run_id": plan.run_id, "flow": flow, "started_at": plan.started_at.replace(tzinfo=None),
        "finished_at": datetime.now(timezone.utc).replace(tzinfo=None), "attempts": attributed,
        "rules_version": current_rules_version(config), "lake_root": config.lake.root, "run_date": plan.run_date,
        "found": plan.found, "skipped": len(plan.skipped), "failed": len(failures),
    }
    load_attempts(config.warehouse.path, parts, run, failures, filesystem=None if lake.is_local else lake.fs, checkpoint=last)
    if not last:
        fleet = "after the last night" if attributed else "unchanged"
    else:
        fleet = rebuild_fleet(config) if attributed or rebuild_after else "unchanged"
    # the warehouse holds the results now; the run's folder in the lake was only the hand-over between tasks
    remove_run_folder(config, plan.run_id)
    return {"run_id": plan.run_id, "run_date": plan.run_date, "found": plan.found, "skipped": len(plan.skipped),
            "attributed": attributed, "failed": len(failures), "shards": len(shard_urls), "verdicts": dict(sorted(verdicts.items())),
            "attempt_ids": sorted(i for a in attributions for i in a.column("attempt_id").to_pylist()),
            "failures": [{k: f.get(k) for k in ("attempt_id", "spec_uri", "stage", "error")} for f in failures],
            "fleet": fleet, "warehouse": config.warehouse.path,
            "nearest_days": [{"date": d.isoformat(), "attempts": n} for d, n in plan.nearest]}


def remove_run_folder(config: Config, run_id: str) -> None:
    lake = config_lake(config)
    run_folder = lake.path("results", f"run={run_id}")
    if lake.fs.exists(run_folder):
        lake.fs.rm(run_folder, recursive=True)


def rebuild_fleet(config: Config) -> str:
    """Rebuild the fleet aggregates; a failure there is reported, never undoes the night's load."""
    try:
        rebuild(config.warehouse.path, config)
        return "rebuilt"
    except Exception as e:  # noqa: BLE001
        log.warning("nightly: fleet aggregates not rebuilt: %s", describe(e))
        return f"failed: {describe(e)}"


def run_nightly(config: Config, run_date: str | date | None = None, catalog: str | None = None, force: bool = False,
                shards: int = 0, flow: str = "nightly") -> dict:
    """One night (default yesterday) without Prefect."""
    return run_nights(config, [parse_run_date(run_date)], catalog, force, shards, flow)[0]


@contextmanager
def locked_nights(config: Config, days: Sequence[date], catalog: str | None = None, force: bool = False,
                  shards: int = 0) -> Iterator[list[Plan]]:
    """The plans of `days`, made and used under the warehouse's nightly lock (named by the first night's run)."""
    run_id = uuid.uuid4().hex
    with nightly_lock(config.warehouse.path, run_id):
        with progress.stage("nightly: discover") as discovered:
            plans = plan_nights(config, days, catalog, force, shards, first_run_id=run_id)
            discovered.advance(sum(plan.found for plan in plans))
        for plan in plans:
            log.info("nightly %s: %d found, %d unchanged, %d to do in %d shards; catalog %s; warehouse %s", plan.run_date,
                     plan.found, len(plan.skipped), len(plan.todo), len(plan.shards),
                     ", ".join(catalog_patterns(config, catalog)) or "from the schedulers", config.warehouse.path)
        yield plans


def run_nights(config: Config, days: Sequence[date], catalog: str | None = None, force: bool = False, shards: int = 0,
               flow: str = "nightly") -> list[dict]:
    """Every night of `days` without Prefect, one warehouse load per night: the same functions the flow's tasks call.
    Start-up and catalog discovery are paid once for all nights, and so are the warehouse's checkpoint and the fleet
    aggregates (after the last night); the warehouse's nightly lock is held throughout, named by the first night's
    run."""
    summaries = []
    with locked_nights(config, days, catalog, force, shards) as plans, ShardWorkers() as workers:
        for night, plan in enumerate(plans, 1):
            claim_results(config, plan.run_id)
            try:
                urls, failures = _run_shards(plan, config, workers)
            except BaseException:  # interrupted or failed before the load: no shard folders are left behind in the lake
                remove_run_folder(config, plan.run_id)
                raise
            with progress.stage(f"nightly {plan.run_date}: load into the warehouse") as loaded:
                summaries.append(load_results(urls, plan, config, flow=flow, extra_failures=failures, last=night == len(plans),
                                              rebuild_after=any(s["attributed"] for s in summaries)))
                loaded.advance(summaries[-1]["attributed"])
    return summaries


# Below this many attempts a second process costs more (interpreter start and imports, ~1 CPU-s) than it saves.
_PARALLEL_MIN_ATTEMPTS = 16


class ShardWorkers:
    """The run's shard processes (one per core, spawned: no state leaks from the parent), started on the first night
    that needs them and kept for the following nights, so a backfill pays their start-up and imports once; replaced
    after one of them died."""

    def __init__(self):
        self.pool: ProcessPoolExecutor | None = None

    def get(self) -> ProcessPoolExecutor:
        if self.pool is None:
            self.pool = process_pool(os.cpu_count() or 1)
        return self.pool

    def close(self, cancel_futures: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel_futures)
            self.pool = None

    def __enter__(self) -> "ShardWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close(cancel_futures=exc[0] is not None)


def _run_shards(plan: Plan, config: Config, workers: ShardWorkers) -> tuple[list[str], list[dict]]:
    """The shards on every core; a shard whose process dies becomes failure rows for its attempts, the others go on."""
    urls, failures = [], []
    with progress.stage(f"nightly {plan.run_date}: land + attribute", total=len(plan.todo)) as done:
        # a small night runs in this process unless the run's workers are up already
        small = len(plan.shards) <= 1 or len(plan.todo) < _PARALLEL_MIN_ATTEMPTS
        if (os.cpu_count() or 1) <= 1 or small and workers.pool is None:
            for i, shard in enumerate(plan.shards):
                urls.append(run_shard(i, shard, config, plan.run_id))
                done.advance(len(shard), sum(c.log_bytes for c in shard))
            return urls, failures
        pool = workers.get()
        futures = [pool.submit(run_shard, i, shard, config, plan.run_id) for i, shard in enumerate(plan.shards)]
        try:
            for shard, future in zip(plan.shards, futures):
                try:
                    urls.append(future.result())
                except Exception as e:  # noqa: BLE001 - a lost worker (out of memory, killed) fails its shard only
                    failures.extend(shard_failure_rows(shard, e))
                    if isinstance(e, BrokenExecutor):  # the pool is unusable now: the next night starts a new one
                        workers.close()
                done.advance(len(shard), sum(c.log_bytes for c in shard))
        except BaseException:  # interrupted: drop the shards not started instead of waiting for them
            workers.close(cancel_futures=True)
            raise
    return urls, failures


def shard_failure_rows(shard: Sequence[Candidate], error: BaseException | str) -> list[dict]:
    """Failure rows for every attempt of a shard whose task died as a whole (a worker lost, say)."""
    text = error if isinstance(error, str) else describe(error)
    return [run_failure(c.attempt_id, c.spec_uri, "shard", text) for c in shard]


def render_summary(summary: dict) -> str:
    lines = [
        f"nightly {summary['run_date']}  run {summary['run_id'][:12]}  warehouse {summary['warehouse']}",
        f"attempts found {summary['found']}, skipped (unchanged) {summary['skipped']}, attributed {summary['attributed']}, "
        f"failed {summary['failed']}  ({summary['shards']} shard{'s' if summary['shards'] != 1 else ''})",
    ]
    if not summary["found"]:
        nearest = ", ".join(f"{d['date']} ({d['attempts']})" for d in summary["nearest_days"])
        lines.append(f"no attempts ended on {summary['run_date']} (UTC); "
                     + (f"nearest days with attempts: {nearest}" if nearest else "the catalog holds no ended attempt"))
    if summary["verdicts"]:
        lines.append("verdicts: " + ", ".join(f"{k} {v}" for k, v in summary["verdicts"].items()))
    for f in summary["failures"][:10]:
        lines.append(f"  FAILED {f['attempt_id'] or '-'} [{f['stage']}] {f['spec_uri']}: {(f['error'] or '')[:160]}")
    if len(summary["failures"]) > 10:
        lines.append(f"  … {len(summary['failures']) - 10} more: SELECT * FROM run_failures WHERE run_id = '{summary['run_id']}'")
    if summary["fleet"] != "unchanged":  # nothing attributed: the fleet tables were left as they were
        lines.append(f"fleet aggregates: {summary['fleet']}")
    return "\n".join(lines)


# helpers --------------------------------------------------------------------------------------------------------

def _write(lake: Lake, path: str, table: pa.Table) -> None:
    with lake.fs.open(path, "wb") as f:
        pq.write_table(table, f, compression="zstd")


def _read(lake: Lake, path: str) -> pa.Table:
    with lake.fs.open(path, "rb") as f:
        return pq.read_table(f)


