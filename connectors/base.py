"""The two kinds of connector and the staging area remote sources write into (docs/DESIGN.md §8).

A *scheduler* connector turns a scheduler's records into AttemptContexts (one per attempt: requeues and
re-admissions are attempts). A *source* connector fetches the logs or metrics of one attempt's nodes and window from
a remote backend (Loki, Prometheus, the Kubernetes API) and stages them as files in the lake, in the formats the local
landing path already reads: text lines that start with an RFC 3339 timestamp, and long-format metrics CSV. Staging
keeps memory bounded (pages are streamed to the file) and leaves a copy that evidence points at.

Plug-ins implement the same two protocols and register them under the entry-point groups
`firstfault.schedulers` and `firstfault.sources` (firstfault/connectors/registry.py).
"""
from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import IO, Any, Protocol, runtime_checkable

from firstfault.lake import STAGED, Lake
from firstfault.connectors.static_context import AttemptContext, LogSpec, context_to_dict


@dataclass
class Report:
    """One `connector_reports` row: what a connector fetched, or why it fetched nothing."""
    connector: str
    source: str
    uri: str
    status: str  # ok | empty | missing | error | skipped
    rows: int = 0
    reason: str | None = None


@runtime_checkable
class SchedulerConnector(Protocol):
    name: str  # `--<name> ID` on the command line, `[<name>]` in firstfault.toml

    def resolve(self, ref: str) -> list[AttemptContext]:
        """The attempts of one scheduler id (`JOBID[:ATTEMPT]`, `NAMESPACE/WORKLOAD`); BadInput when unknown."""

    def discover(self, start: datetime, end: datetime) -> list[AttemptContext]:
        """Every attempt that ended in [start, end) (UTC)."""


@runtime_checkable
class SourceConnector(Protocol):
    name: str

    def applies(self, ctx: AttemptContext) -> bool:
        """Whether this connector has anything to fetch for the attempt (configured, right kind of context)."""

    def stage(self, ctx: AttemptContext, staging: "Staging") -> list[Report]:
        """Fetch the attempt's data into `staging`; never raise for a backend failure: report it."""


@dataclass
class Staging:
    """Where one attempt's remote data lands before the normal landing path reads it:
    `{lake}/staged/day=D/attempt_key=K/{connector}/...`. Re-staging a connector replaces its folder."""
    lake: Lake
    ctx: AttemptContext
    logs: list[LogSpec] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)

    def _folder(self, connector: str) -> str:
        return self.lake.path(STAGED, f"day={self.ctx.day}", f"attempt_key={self.ctx.attempt_key}", connector)

    def reset(self, connector: str) -> None:
        folder = self._folder(connector)
        if self.lake.fs.exists(folder):
            self.lake.fs.rm(folder, recursive=True)

    def open_log(self, connector: str, name: str, *, source: str, origin: dict[str, Any], label: str = "rank") -> IO[bytes]:
        """A binary file for one stream's lines (`<RFC 3339 UTC timestamp> <line>\\n`). `origin` (the backend URL,
        the stream's labels) is copied into the locator of every event extracted from it."""
        path = posixpath.join(self._folder(connector), name)
        self.lake.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        self.logs.append(LogSpec(source=source, path=self.lake.fs.unstrip_protocol(path), label=label,
                                 origin=json.dumps(origin, sort_keys=True)))
        return self.lake.fs.open(path, "wb")

    def open_metrics(self, connector: str, name: str) -> IO[bytes]:
        """A binary file for long-format metrics CSV (`ts,node,metric,value,gpu,port`, header included)."""
        path = posixpath.join(self._folder(connector), name)
        self.lake.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        self.metrics.append(self.lake.fs.unstrip_protocol(path))
        return self.lake.fs.open(path, "wb")

    def context(self) -> AttemptContext:
        """The attempt's context with the staged files added to its logs and metrics."""
        return replace(self.ctx, logs=self.ctx.logs + tuple(self.logs), metrics=self.ctx.metrics + tuple(self.metrics))


def save_context(lake: Lake, ctx: AttemptContext) -> str:
    """Keep a scheduler-discovered context in the lake as a static context (JSON, absolute paths) and return its
    URL: nightly shards and `attribute --static` read it like any spec; rewriting the same attempt replaces it."""
    path = lake.path("contexts", f"day={ctx.day}", f"{ctx.attempt_key}.json")
    lake.fs.makedirs(posixpath.dirname(path), exist_ok=True)
    with lake.fs.open(path, "wb") as f:
        f.write(json.dumps(context_to_dict(ctx), indent=1, sort_keys=True).encode())
    return path if lake.is_local else lake.fs.unstrip_protocol(path)
