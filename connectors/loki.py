"""Loki source connector: the log streams of an attempt's nodes over its window, staged as text files.

For every `[loki] streams` entry (source name -> LogQL stream selector) one `query_range` query reads the window
forward in pages of `limit` entries, the stream selector narrowed to the attempt's nodes with
`<node_label>=~"node-01|node-02"`. Each page is written at once to the staged file of its stream (one file per
stream, `<RFC 3339 ns timestamp> <line>`), so memory is bounded by one page whatever the volume. The file name
carries the node (the stream's node label), which is how the landing path places its lines; the staged file's origin
(the Loki URL and the stream's labels) and each line's own nanosecond timestamp become the locator of its events.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import IO, ClassVar
from urllib.parse import quote

import polars as pl

from firstfault.config import Config, LokiSettings
from firstfault.connectors.base import Report, Staging
from firstfault.connectors.http import ConnectorError, HttpClient, public_url
from firstfault.connectors.static_context import AttemptContext
from firstfault.errors import BadInput

log = logging.getLogger(__name__)

QUERY_RANGE = "/loki/api/v1/query_range"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
_PAGE_SCHEMA = {"ts": pl.String, "line": pl.String}
_STAMP = pl.col("ts").cast(pl.Datetime("ns")).dt.strftime("%Y-%m-%dT%H:%M:%S%.9fZ")
# One staged line per physical line: the lines of a multi-line entry (a traceback shipped as one entry) each get the
# entry's stamp, so every event extracted from them keeps Loki's exact timestamp.
_STAGED_TEXT = pl.concat_str(
    _STAMP, pl.lit(" "),
    pl.col("line").str.strip_chars_end("\n").str.replace_all("\n", pl.concat_str(pl.lit("\n"), _STAMP, pl.lit(" ")), literal=True),
).str.join("\n")


@dataclass(frozen=True)
class LokiConnector:
    settings: LokiSettings
    name: ClassVar[str] = "loki"

    def applies(self, ctx: AttemptContext) -> bool:
        return bool(ctx.nodes)

    def stage(self, ctx: AttemptContext, staging: Staging) -> list[Report]:
        base = public_url(self.settings.url.rstrip("/"))
        start, end = self.window(ctx)
        try:
            client = HttpClient(self.settings, self.name, headers={"X-Scope-OrgID": self.settings.org_id} if self.settings.org_id else None)
        except ConnectorError as e:
            return [Report(self.name, source, base, "error", 0, e.reason) for source in sorted(self.settings.streams)]
        reports: list[Report] = []
        down: ConnectorError | None = None
        with client:
            for source, selector in sorted(self.settings.streams.items()):
                query = with_node_matcher(selector, self.settings.node_label, ctx.nodes)
                if down:  # do not wait out the retries again for each source
                    reports.append(Report(self.name, source, _query_uri(base, query), "error", 0, f"not queried: {down.reason}"))
                    continue
                fetch = _SourceFetch(client, staging, source, base, self.settings.node_label)
                reports += fetch.run(query, start, end, self.settings.limit)
                if fetch.failure and fetch.failure.unreachable:
                    down = fetch.failure
        return reports

    def window(self, ctx: AttemptContext) -> tuple[int, int]:
        """[start, end) in Unix nanoseconds: the attempt widened by lookback_s before and grace_s after."""
        end = ctx.end or ctx.start
        return (_ns(ctx.start - timedelta(seconds=self.settings.lookback_s)),
                _ns(end + timedelta(seconds=self.settings.grace_s)))


@dataclass
class _SourceFetch:
    """One source's query paged through the window, each page written to the staged files of its streams."""
    client: HttpClient
    staging: Staging
    source: str
    base_url: str
    node_label: str
    files: dict[str, IO[bytes]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    failure: ConnectorError | None = None

    def run(self, query: str, start: int, end: int, limit: int) -> list[Report]:
        try:
            for page in self._pages(query, start, end, limit):
                for key, entries in page:
                    self._write(key, entries)
        except ConnectorError as e:
            self.failure = e
            return [Report(LokiConnector.name, self.source, _query_uri(self.base_url, query), "error", sum(self.rows.values()),
                           e.reason + (f" (after {sum(self.rows.values())} entries)" if self.rows else ""))]
        except OSError as e:  # the lake could not take the staged file
            return [Report(LokiConnector.name, self.source, _query_uri(self.base_url, query), "error", sum(self.rows.values()),
                           f"staging: {type(e).__name__}: {e}")]
        finally:
            for f in self.files.values():
                f.close()
        log.info("loki: %s: %d entries in %d streams", self.source, sum(self.rows.values()), len(self.rows))
        if not self.rows:
            return [Report(LokiConnector.name, self.source, _query_uri(self.base_url, query), "empty", 0,
                           f"no entries between {_iso(start)} and {_iso(end)}")]
        note = "; ".join(self.notes) or None
        return [Report(LokiConnector.name, self.source, _query_uri(self.base_url, _exact_selector(json.loads(key))), "ok", n, note)
                for key, n in sorted(self.rows.items())]

    def _pages(self, query: str, start: int, end: int, limit: int) -> Iterator[list[tuple[str, pl.DataFrame]]]:
        """The new entries of each page, per stream. The next page starts at the last timestamp returned, not after
        it: several entries can share one nanosecond and a page may end between them. The lines already written at
        that timestamp (at most one page of them) are dropped from the next page."""
        seen: dict[str, pl.Series] = {}  # stream -> its lines already written at `start`
        while start < end:
            body = self.client.get_json(QUERY_RANGE, {"query": query, "start": start, "end": end, "limit": limit, "direction": "forward"})
            page = _parse_page(body)
            entries = sum(frame.height for _, frame in page)
            if not entries:
                return
            yield [(key, _drop_lines_at(frame, start, seen[key]) if key in seen else frame) for key, frame in page]
            if entries < limit:
                return
            last = max(frame["ts"].max() for _, frame in page)
            if last <= start:
                # a full page of one timestamp: Loki cannot page inside one nanosecond, so move past it
                self.notes.append(f"the entries at ns {start} ({_iso(start)}) fill a whole page; any beyond the first "
                                  f"{limit} are skipped (raise [loki] limit to read them)")
                start, seen = start + 1, {}
            else:
                start = last
                seen = {key: frame.filter(pl.col("ts") == last)["line"] for key, frame in page if frame["ts"].max() == last}

    def _write(self, key: str, entries: pl.DataFrame) -> None:
        if not entries.height:
            return
        f = self.files.get(key) or self._open(key)
        f.write(entries.select(_STAGED_TEXT).item().encode() + b"\n")
        self.rows[key] = self.rows.get(key, 0) + entries.height

    def _open(self, key: str) -> IO[bytes]:
        labels = json.loads(key)
        node = labels.get(self.node_label, "")
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        # the landing path reads the node from the file name (connectors/local_files.py)
        name = f"{_path_safe(self.source)}/{_path_safe(node) + '.' if node else ''}{digest}.log"
        origin = {"connector": LokiConnector.name, "url": self.base_url, "stream": labels}
        self.files[key] = self.staging.open_log(LokiConnector.name, name, source=self.source, origin=origin)
        return self.files[key]


def _parse_page(body) -> list[tuple[str, pl.DataFrame]]:
    """A `streams` answer as (the stream's labels as sorted JSON, its entries: `ts` Int64 ns, `line`) per stream."""
    try:
        if body.get("status") != "success" or body["data"]["resultType"] != "streams":
            raise ConnectorError(f"loki: unexpected answer (status {body.get('status')!r}, "
                                 f"resultType {body.get('data', {}).get('resultType')!r})")
        return [
            (json.dumps(item["stream"], sort_keys=True),
             pl.DataFrame(item["values"], schema=_PAGE_SCHEMA, orient="row").with_columns(pl.col("ts").cast(pl.Int64)))
            for item in body["data"]["result"] if item["values"]
        ]
    except (AttributeError, KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as e:
        raise ConnectorError(f"loki: malformed query_range answer ({type(e).__name__})") from None


def _drop_lines_at(entries: pl.DataFrame, ts: int, lines: pl.Series) -> pl.DataFrame:
    return entries.filter(~((pl.col("ts") == ts) & pl.col("line").is_in(lines.implode())))


def with_node_matcher(selector: str, label: str, nodes) -> str:
    """`{job="syslog"} |= "x"` -> `{job="syslog", host=~"node\\\\-01|node\\\\-02"} |= "x"`: the stream selector
    narrowed to the nodes (exact names: RE2 matchers are anchored, metacharacters escaped)."""
    close = _selector_end(selector)
    inner = selector[selector.index("{") + 1:close].strip()
    alternation = "|".join(_RE2_SPECIAL.sub(r"\\\1", n) for n in sorted(nodes))
    matcher = f"{label}=~{_logql_string(alternation)}"
    return "{" + (f"{inner}, " if inner else "") + matcher + "}" + selector[close + 1:]


def _selector_end(selector: str) -> int:
    """Index of the `}` closing the leading stream selector (quoted values may hold braces); ValueError if none."""
    text = selector.lstrip()
    if not text.startswith("{"):
        raise ValueError("must start with a stream selector {label=\"value\", ...}")
    quote_char, escaped = "", False
    for i in range(selector.index("{") + 1, len(selector)):
        c = selector[i]
        if quote_char:
            if escaped:
                escaped = False
            elif c == "\\" and quote_char == '"':
                escaped = True
            elif c == quote_char:
                quote_char = ""
        elif c in "\"`":
            quote_char = c
        elif c == "}":
            return i
    raise ValueError("the stream selector is not closed with }")


def _logql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _exact_selector(labels: dict) -> str:
    return "{" + ",".join(f"{k}={_logql_string(str(v))}" for k, v in sorted(labels.items())) + "}"


def _query_uri(base_url: str, query: str) -> str:
    return f"{base_url}{QUERY_RANGE}?query=" + quote(query, safe='{}=~|,:"')  # readable: braces, quotes, matchers kept


def _path_safe(name: str) -> str:
    # glob characters would make the landing path treat the staged file name as a pattern
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _ns(t: datetime) -> int:
    return (t - _EPOCH) // timedelta(microseconds=1) * 1000


def _iso(ns: int) -> str:
    return (_EPOCH + timedelta(microseconds=ns // 1000)).isoformat().replace("+00:00", "Z")


def from_config(config: Config) -> LokiConnector | None:
    settings = config.loki
    if not settings.url:
        return None
    if not settings.streams:
        raise BadInput("firstfault.toml", "loki.streams", 'required when [loki] url is set, e.g. {syslog = \'{job="syslog"}\'}')
    for source, selector in settings.streams.items():
        if not isinstance(selector, str):
            raise BadInput("firstfault.toml", f"loki.streams.{source}", "must be a LogQL stream selector string")
        try:
            _selector_end(selector)
        except ValueError as e:
            raise BadInput("firstfault.toml", f"loki.streams.{source}", str(e)) from None
    if settings.limit < 1:
        raise BadInput("firstfault.toml", "loki.limit", "must be >= 1")
    if not settings.node_label:
        raise BadInput("firstfault.toml", "loki.node_label", "must name the stream label holding the node")
    return LokiConnector(settings)
