"""Catalog discovery: the static contexts of the attempts that ended on a UTC day, from catalog folders, buckets or
globs and from the scheduler connectors the config enables; each with its input fingerprint. A malformed spec or an
unreachable scheduler is a failure row, never a failed night."""
from __future__ import annotations

import fnmatch
import glob
import logging
import os
import posixpath
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import fsspec

from firstfault.config import ApiSettings, Config
from firstfault.connectors.base import save_context
from firstfault.connectors.fingerprint import input_identity
from firstfault.connectors.registry import scheduler_connectors
from firstfault.connectors.static_context import load_static_context
from firstfault.errors import BadInput, describe
from firstfault.lake import Lake
from firstfault.schema import run_failure

log = logging.getLogger(__name__)

SPEC_SUFFIXES = ("*.yaml", "*.yml", "*.json")


@dataclass(frozen=True)
class Candidate:
    """One discovered attempt: small and picklable, what a shard task receives (never data)."""
    spec_uri: str
    attempt_id: str
    cluster: str
    workload_id: str
    fingerprint: str
    log_bytes: int = 0  # the size of its logs: the progress of a night in MB


def catalog_patterns(config: Config, catalog: str | None = None) -> list[str]:
    """`catalog` (a folder, bucket prefix or glob) overrides `[catalog] paths`; a folder means every spec under it."""
    if catalog:
        patterns = [catalog]
    elif config.catalog.paths:
        patterns = list(config.catalog.paths)
    else:
        return []
    out = []
    for p in patterns:
        if any(c in p for c in "*?["):
            out.append(p)
        else:
            out.extend(posixpath.join(p.rstrip("/"), "**", s) for s in SPEC_SUFFIXES)
    return out


def check_catalog(config: Config, catalog: str | None = None) -> None:
    """A catalog folder that does not exist or a glob that matches no file is a typo in a cron line, not an empty
    night: BadInput naming the entry and where it came from (`--catalog` or `[catalog] paths`)."""
    field = "--catalog" if catalog else "catalog.paths"
    for entry in [catalog] if catalog else config.catalog.paths:
        if any(c in entry for c in "*?["):
            if not list_specs([entry]):
                raise BadInput(entry, field, "matches no file")
            continue
        fs, path = fsspec.core.url_to_fs(entry)
        if not fs.exists(path):
            raise BadInput(entry, field, "no such folder or file")


def list_specs(patterns: Sequence[str]) -> list[str]:
    """Every spec file matched by the fsspec globs; local files as plain paths (as `attribute --static` gets them)."""
    found: set[str] = set()
    walked: dict[str, list[str]] = {}
    for pattern in patterns:
        fs, path = fsspec.core.url_to_fs(pattern)
        if "file" not in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
            found.update(fs.unstrip_protocol(p) for p in fs.glob(path) if fs.isfile(p))
            continue
        root, _, name = path.partition("/**/")
        if name and not any(c in root + "/" for c in "*?[") and "/" not in name:
            # `<folder>/**/*.yaml` and its siblings: one walk of a big local catalog (a folder per attempt), not one
            # per suffix, and ~10x faster than fsspec's glob
            if root not in walked:
                walked[root] = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]
            found.update(p for p in walked[root] if fnmatch.fnmatch(os.path.basename(p), name))
        else:
            # whatever is not a folder: a FIFO or a device named like a spec is a failure row (load_static_context)
            found.update(p for p in glob.glob(path, recursive=True) if not os.path.isdir(p))
    return sorted(found)


def discover_scheduled(config: Config, run_date: date) -> tuple[list[str], list[dict], int]:
    """Ask every scheduler connector the config enables for the attempts that ended on run_date (UTC); each one
    is kept in the lake as a static context (connectors/base.py save_context) and handled like a catalog spec.
    A scheduler that cannot be reached is a failure row, not a failed night. Returns (specs, failures, schedulers
    asked)."""
    start = datetime.combine(run_date, datetime.min.time(), tzinfo=timezone.utc)
    specs, failures = [], []
    connectors = scheduler_connectors(config)
    for name, connector in sorted(connectors.items()):
        try:
            contexts = connector.discover(start, start + timedelta(days=1))
        except Exception as e:  # noqa: BLE001 - one scheduler down never sinks the night
            failures.append(run_failure(None, name, "discover", describe(e)))
            continue
        specs.extend(save_context(Lake(config.lake.root, config.lake.storage_options()), ctx) for ctx in contexts)
    return specs, failures, len(connectors)


def discover(patterns: Sequence[str], days: Sequence[date], extra_specs: Sequence[str] = (), limits: ApiSettings = ApiSettings()
             ) -> tuple[dict[date, list[Candidate]], list[dict], Counter]:
    """The attempts whose `end` falls on one of `days` (UTC), by day, with their input fingerprints: every spec is
    read once whatever the number of days. Malformed specs, specs over the `limits` ([api] max_nodes, ...) and
    unreadable inputs become failure rows. Returns
    (candidates by day, failures, attempts per UTC end day of every spec read: an empty night names the nearest days
    that have attempts)."""
    specs = sorted(set(list_specs(patterns)) | set(extra_specs))
    wanted = set(days)
    candidates: dict[str, Candidate] = {}
    day_of: dict[str, date] = {}
    failures: list[dict] = []
    ended: Counter = Counter()
    for uri in specs:
        try:
            ctx = load_static_context(uri, limits)
        except BadInput as e:
            failures.append(run_failure(None, uri, "spec", str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - one spec never sinks the night
            failures.append(run_failure(None, uri, "spec", f"{type(e).__name__}: {e}"))
            continue
        if ctx.end is None:
            continue
        day = ctx.end.astimezone(timezone.utc).date()
        ended[day] += 1
        if day not in wanted:
            continue
        if ctx.attempt_id in candidates:
            failures.append(run_failure(ctx.attempt_id, uri, "discover", f"duplicate attempt_id, also in {candidates[ctx.attempt_id].spec_uri}"))
            continue
        try:
            fp, size = input_identity(ctx)
        except Exception as e:  # noqa: BLE001
            failures.append(run_failure(ctx.attempt_id, uri, "discover", f"inputs not listable: {type(e).__name__}: {e}"))
            continue
        candidates[ctx.attempt_id] = Candidate(uri, ctx.attempt_id, ctx.cluster, ctx.workload_id, fp, size)
        day_of[ctx.attempt_id] = day
    for f in failures:
        log.warning("nightly: %s failed at %s: %s", f["spec_uri"], f["stage"], f["error"])
    by_day: dict[date, list[Candidate]] = {d: [] for d in sorted(wanted)}
    for attempt_id in sorted(candidates):
        by_day[day_of[attempt_id]].append(candidates[attempt_id])
    return by_day, failures, ended


def nearest_days(ended: Counter, run_date: date) -> list[tuple[date, int]]:
    """The closest day before and the closest day after run_date that have attempts, with their counts."""
    before = [d for d in ended if d < run_date]
    after = [d for d in ended if d > run_date]
    return [(d, ended[d]) for d in (max(before, default=None), min(after, default=None)) if d is not None]
