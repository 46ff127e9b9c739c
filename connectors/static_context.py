"""Static execution context: load, validate, normalise one ATTEMPT.yaml/JSON."""
from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import fsspec
import yaml

from firstfault import yamlio
from firstfault.config import ApiSettings
from firstfault.connectors.regular_files import NotRegularFile, read_at_most
from firstfault.connectors.urls import NotNormal, url_key
from firstfault.errors import BadInput
from firstfault.ids import attempt_id, attempt_key, day_key

KNOWN_KEYS = {
    "workload_id", "attempt", "cluster", "state", "exit_code", "start", "end", "timezone", "gpu_model",
    "gpus_per_node", "nodes", "ranks", "logs", "metrics", "flight_recorder", "boot_times", "addresses", "scheduler",
}
LABEL_MODES = ("rank", "node")
MAX_TEXT_CHARS = 200       # ids, names and zones: longer ones are not real, and ids become file names in the lake
MAX_KEY_CHARS = 240        # the attempt's path-safe key is a folder name (255 bytes at most on most filesystems)
MAX_INT = 2**31 - 1        # attempt, rank and local_rank fit the int32/int64 columns they go to
MAX_GPUS_PER_NODE = 1024   # nodes x gpus_per_node ranks are built in memory
MAX_SPEC_BYTES = 16 * 2**20  # a context of 10,000 nodes with their ranks is about 1 MB
EARLIEST, LATEST = datetime(1970, 1, 2, tzinfo=timezone.utc), datetime(3000, 1, 1, tzinfo=timezone.utc)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# ids keep the text written in a YAML file: `017` and `15` are two workloads, not one
IDS_AS_WRITTEN = (("workload_id",), ("cluster",), ("nodes", yamlio.EACH_ITEM), ("ranks", yamlio.EACH_ITEM, "node"),
                  ("boot_times", yamlio.EACH_KEY), ("addresses", yamlio.EACH_KEY))


@dataclass(frozen=True)
class LogSpec:
    source: str
    path: str
    label: str = "rank"  # what an `srun --label` task id means in this file: the global rank or the node index
    origin: str = ""  # JSON: where a staged file came from (connectors/base.py); merged into its events' locators


@dataclass(frozen=True)
class AttemptContext:
    workload_id: str
    attempt: int
    cluster: str
    start: datetime
    end: datetime | None
    nodes: tuple[str, ...]
    state: str | None = None
    exit_code: str | None = None
    timezone: str = "UTC"
    gpu_model: str | None = None
    gpus_per_node: int = 8
    ranks: tuple[tuple[int, str, int], ...] = ()  # (rank, node, local_rank); empty = node-major default
    logs: tuple[LogSpec, ...] = ()
    metrics: tuple[str, ...] = ()
    flight_recorder: tuple[str, ...] = ()
    boot_times: tuple[tuple[str, datetime], ...] = ()
    addresses: tuple[tuple[str, str], ...] = ()  # (address, node) known up front
    base_uri: str = "."  # folder the relative paths are resolved against (fsspec URL)
    spec_uri: str = ""
    # what a scheduler connector knows beyond the keys above (the `scheduler` key: name, ref, pods, ...)
    scheduler: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def attempt_id(self) -> str:
        return attempt_id(self.cluster, self.workload_id, self.attempt)

    @property
    def attempt_key(self) -> str:
        return attempt_key(self.attempt_id)

    @property
    def day(self) -> str:
        return day_key(self.start)

    def rank_map(self) -> list[tuple[int, str, int]]:
        if self.ranks:
            return list(self.ranks)
        g = self.gpus_per_node
        return [(i * g + lr, n, lr) for i, n in enumerate(self.nodes) for lr in range(g)]


def load_static_context(path: str, limits: ApiSettings | None = None) -> AttemptContext:
    """Read and validate a static context, within `limits` when given (a run's `config.api`: see check_sizes); raise
    BadInput naming the file and field."""
    try:
        data = read_at_most(path, MAX_SPEC_BYTES)
        if len(data) > MAX_SPEC_BYTES:
            raise BadInput(path, None, f"larger than {MAX_SPEC_BYTES // 2**20} MiB: not a static context")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise BadInput(path, None, "file not found") from None
    except NotRegularFile as e:
        raise BadInput(path, None, str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(path, None, f"cannot read: {e}") from None
    try:
        doc = json.loads(text) if path.endswith(".json") else yamlio.safe_load(text, IDS_AS_WRITTEN)
    except json.JSONDecodeError as e:
        raise BadInput(path, None, f"not valid JSON: {e}") from None
    except yaml.YAMLError as e:
        raise BadInput(path, None, yamlio.describe_error(e)) from None
    except RecursionError:
        raise BadInput(path, None, f"not valid {'JSON' if path.endswith('.json') else 'YAML'}: nested too deeply") from None
    except ValueError as e:  # a number of more than 4,300 digits (Python's limit on int from text)
        raise BadInput(path, None, f"not valid {'JSON' if path.endswith('.json') else 'YAML'}: {e}") from None
    ctx = context_from_dict(doc, path, posixpath.dirname(path) or ".")
    if limits is not None:
        check_sizes(ctx, limits, path)
    return ctx


def check_sizes(ctx: AttemptContext, limits: ApiSettings, file: str, whose: str = "the") -> None:
    """Refuse an attempt bigger than the `[api]` size limits, for a file as for a request: what a run builds for an
    attempt (its rank map, placement lookups) grows with these counts."""
    def over(field_: str, value: int, limit: int, key: str, what: str = "") -> None:
        if value > limit:
            raise BadInput(file, field_, f"{what}{value} is over {whose} limit of {limit} ([api] {key})")

    over("nodes", len(ctx.nodes), limits.max_nodes, "max_nodes")
    over("gpus_per_node", ctx.gpus_per_node, limits.max_gpus_per_node, "max_gpus_per_node")
    over("ranks", len(ctx.ranks), limits.max_ranks, "max_ranks")
    over("gpus_per_node", len(ctx.nodes) * ctx.gpus_per_node, limits.max_ranks, "max_ranks", "nodes x gpus_per_node = ")


def context_from_dict(doc: Any, spec_uri: str, base_uri: str) -> AttemptContext:
    v = _Validator(spec_uri)
    if not isinstance(doc, dict):
        raise BadInput(spec_uri, None, "the document must be a mapping of keys to values")
    unknown = sorted(set(doc) - KNOWN_KEYS)
    if unknown:
        raise BadInput(spec_uri, unknown[0], "unknown key")
    nodes = v.node_list(doc)
    tz = v.timezone(doc)
    start = v.timestamp(doc, "start", required=True, tz=tz)
    end = v.timestamp(doc, "end", required=False, tz=tz)
    if end is not None and end < start:
        raise BadInput(spec_uri, "end", "is before start")
    gpus = v.integer(doc, "gpus_per_node", default=8, minimum=1, maximum=MAX_GPUS_PER_NODE)
    ctx = AttemptContext(
        workload_id=v.identifier(doc, "workload_id", required=True),
        attempt=v.integer(doc, "attempt", default=0, minimum=0),
        cluster=v.cluster(doc),
        state=(v.text(doc, "state") or "").upper() or None,
        exit_code=None if doc.get("exit_code") is None else str(doc["exit_code"]),
        start=start,
        end=end,
        nodes=nodes,
        timezone=tz,
        gpu_model=v.text(doc, "gpu_model"),
        gpus_per_node=gpus,
        ranks=v.ranks(doc, set(nodes)),
        logs=v.logs(doc),
        metrics=v.paths(doc, "metrics"),
        flight_recorder=v.paths(doc, "flight_recorder"),
        boot_times=v.boot_times(doc, set(nodes), tz),
        addresses=v.addresses(doc, set(nodes)),
        scheduler=v.mapping(doc, "scheduler"),
        base_uri=base_uri,
        spec_uri=spec_uri,
    )
    if len(ctx.attempt_key) > MAX_KEY_CHARS:
        raise BadInput(spec_uri, "workload_id", f"the attempt id is too long: its path-safe form must fit a file name "
                       f"({len(ctx.attempt_key)} > {MAX_KEY_CHARS} characters)")
    return ctx


def context_to_dict(ctx: AttemptContext) -> dict[str, Any]:
    """The static context that reads back as `ctx`, with every path made absolute: how a context
    discovered from a scheduler is kept in the lake, and what `attribute --static` can re-run by hand."""
    def absolute(path: str) -> str:
        return path if "://" in path or path.startswith("/") else posixpath.join(ctx.base_uri, path)

    def iso(t: datetime | None) -> str | None:
        return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")

    doc: dict[str, Any] = {
        "workload_id": ctx.workload_id, "attempt": ctx.attempt, "cluster": ctx.cluster, "state": ctx.state,
        "exit_code": ctx.exit_code, "start": iso(ctx.start), "end": iso(ctx.end), "timezone": ctx.timezone,
        "gpu_model": ctx.gpu_model, "gpus_per_node": ctx.gpus_per_node, "nodes": list(ctx.nodes),
        "ranks": [{"rank": r, "node": n, "local_rank": lr} for r, n, lr in ctx.ranks],
        "logs": [{"source": s.source, "path": absolute(s.path), "label": s.label} for s in ctx.logs if not s.origin],
        "metrics": [absolute(p) for p in ctx.metrics],
        "flight_recorder": [absolute(p) for p in ctx.flight_recorder],
        "boot_times": {n: iso(t) for n, t in ctx.boot_times},
        "addresses": {n: [a for a, m in ctx.addresses if m == n] for n in sorted({m for _, m in ctx.addresses})},
        "scheduler": ctx.scheduler,
    }
    return {k: v for k, v in doc.items() if v not in (None, [], {})}


class _Validator:
    def __init__(self, file: str):
        self.file = file

    def fail(self, field_: str, problem: str):
        raise BadInput(self.file, field_, problem)

    def text(self, doc, key, *, required=False, default=None):
        value = doc.get(key)
        if value is None:
            if required:
                self.fail(key, "required")
            return default
        if isinstance(value, (dict, list, bool)):
            self.fail(key, "must be a string")
        return self.name(key, str(value).strip(), allow_empty=not required)

    def identifier(self, doc, key, *, required=False, default=None):
        """An id as written: a string (a JSON number is not an id), without surrounding spaces (`'job '` and `job`
        would be two attempts that look like one)."""
        value = doc.get(key)
        if value is None:
            if required:
                self.fail(key, "required")
            return default
        return self.id_text(key, value)

    def id_text(self, key, value):
        if not isinstance(value, str):
            self.fail(key, "must be a string")
        if value != value.strip():
            self.fail(key, "must not start or end with spaces")
        return self.name(key, value)

    def name(self, key, value, *, allow_empty=False):
        """A string that becomes an id, a file name or a column value: short, one line, no control bytes."""
        if not value and not allow_empty:
            self.fail(key, "must not be empty")
        if len(value) > MAX_TEXT_CHARS:
            self.fail(key, f"is {len(value)} characters long, at most {MAX_TEXT_CHARS}")
        if _CONTROL.search(value):
            self.fail(key, "must not contain control characters (NUL, newline, ...)")
        return value

    def cluster(self, doc):
        # `<cluster>/<workload_id>/<attempt>` reads back only when the cluster has no `/` (the attempt never has one)
        cluster = self.identifier(doc, "cluster", default="default")
        if "/" in cluster:
            self.fail("cluster", "must not contain '/': attempt ids are <cluster>/<workload_id>/<attempt>")
        return cluster

    def integer(self, doc, key, *, default, minimum, maximum=MAX_INT, field_=None):
        field_ = field_ or key
        value = doc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            self.fail(field_, "must be an integer")
        try:
            value = int(value)
        except ValueError:
            self.fail(field_, "must be an integer")
        if value < minimum:
            self.fail(field_, f"must be >= {minimum}")
        if value > maximum:
            self.fail(field_, f"must be <= {maximum}")
        return value

    def timezone(self, doc):
        tz = self.text(doc, "timezone", default="UTC")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            self.fail("timezone", f"unknown time zone {tz!r}")
        return tz

    def timestamp(self, doc, key, *, required, tz):
        value = doc.get(key)
        if value is None:
            if required:
                self.fail(key, "required")
            return None
        if isinstance(value, datetime):
            parsed = value
        else:
            try:
                parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
            except ValueError:
                self.fail(key, f"not an ISO 8601 timestamp: {value!r}")
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=ZoneInfo(tz))
        out_of_range = f"{value!s} is outside {EARLIEST.year}-01-02 .. {LATEST.year - 1}-12-31"
        try:
            parsed = parsed.astimezone(timezone.utc)
        except OverflowError:  # year 1 or 9999, shifted out of datetime's range by its zone
            self.fail(key, out_of_range)
        if not EARLIEST <= parsed < LATEST:
            self.fail(key, out_of_range)
        return parsed

    def mapping(self, doc, key):
        value = doc.get(key) or {}
        if not isinstance(value, dict):
            self.fail(key, "must be a mapping")
        return value

    def node_list(self, doc):
        nodes = doc.get("nodes")
        if nodes is None:
            self.fail("nodes", "required")
        if not isinstance(nodes, list) or not nodes:
            self.fail("nodes", "must be a non-empty list of host names")
        names = []
        for i, n in enumerate(nodes):
            names.append(self.id_text(f"nodes[{i}]", n))
        if len(set(names)) != len(names):
            self.fail("nodes", "lists a host twice")
        return tuple(names)

    def ranks(self, doc, nodes):
        ranks = doc.get("ranks")
        if ranks is None:
            return ()
        if not isinstance(ranks, list):
            self.fail("ranks", "must be a list of {rank, node, local_rank}")
        out = []
        for i, r in enumerate(ranks):
            if not isinstance(r, dict) or "rank" not in r or "node" not in r:
                self.fail(f"ranks[{i}]", "needs rank and node")
            if not isinstance(r["node"], str) or r["node"] not in nodes:
                self.fail(f"ranks[{i}].node", f"{r['node']!r} is not in nodes")
            rank = self.integer(r, "rank", default=None, minimum=0, field_=f"ranks[{i}].rank")
            local_rank = self.integer(r, "local_rank", default=0, minimum=0, field_=f"ranks[{i}].local_rank")
            out.append((rank, r["node"], local_rank))
        return tuple(sorted(out))

    def logs(self, doc):
        logs = doc.get("logs") or []
        if not isinstance(logs, list):
            self.fail("logs", "must be a list of {source, path}")
        out = []
        for i, entry in enumerate(logs):
            if not isinstance(entry, dict) or not entry.get("path"):
                self.fail(f"logs[{i}].path", "required")
            path = self.path(f"logs[{i}].path", entry["path"])
            source = entry.get("source") or "applog"
            if not isinstance(source, str):
                self.fail(f"logs[{i}].source", "must be a string")
            label = entry.get("label", "rank")
            if label not in LABEL_MODES:
                self.fail(f"logs[{i}].label", f"must be one of {', '.join(LABEL_MODES)}")
            out.append(LogSpec(source=self.name(f"logs[{i}].source", source.strip()), path=path, label=label))
        return tuple(out)

    def paths(self, doc, key):
        entries = doc.get(key) or []
        if not isinstance(entries, list):
            self.fail(key, "must be a list of {path}")
        out = []
        for i, entry in enumerate(entries):
            path = entry.get("path") if isinstance(entry, dict) else entry
            if not path:
                self.fail(f"{key}[{i}].path", "required")
            out.append(self.path(f"{key}[{i}].path", path))
        return tuple(out)

    def path(self, key, value):
        """A file path, glob or fsspec URL of a scheme fsspec can open, each URL of a chain one whose path means one
        thing (connectors/urls.py)."""
        if not isinstance(value, str):
            self.fail(key, "must be a string")
        if "\x00" in value or "\n" in value:
            self.fail(key, "must not contain NUL or newline characters")
        if "://" in value:
            for scheme in value.split("://", 1)[0].split("::"):
                try:
                    fsspec.get_filesystem_class(scheme)
                except ValueError:
                    self.fail(key, f"unknown URL scheme {scheme!r}")
                except ImportError as e:
                    self.fail(key, f"URL scheme {scheme!r} needs a package that is not installed: {e}")
            for url in (part for part in value.split("::") if "://" in part):
                try:
                    url_key(url)
                except NotNormal as e:
                    self.fail(key, str(e))
        return value

    def boot_times(self, doc, nodes, tz):
        boots = doc.get("boot_times") or {}
        if not isinstance(boots, dict):
            self.fail("boot_times", "must map node names to timestamps")
        out = []
        for node in boots:
            if not isinstance(node, str) or node not in nodes:
                self.fail(f"boot_times.{node}", "is not in nodes")
        for node in sorted(boots):
            out.append((node, self.timestamp(boots, node, required=True, tz=tz)))
        return tuple(out)

    def addresses(self, doc, nodes):
        addrs = doc.get("addresses") or {}
        if not isinstance(addrs, dict):
            self.fail("addresses", "must map node names to lists of addresses")
        out = []
        for node in addrs:
            if not isinstance(node, str) or node not in nodes:
                self.fail(f"addresses.{node}", "is not in nodes")
        for node in sorted(addrs):
            values = addrs[node] if isinstance(addrs[node], list) else [addrs[node]]
            out.extend((str(a), node) for a in values)
        return tuple(out)
