"""Prometheus source connector: the DCGM and InfiniBand series of an attempt's nodes over its window, staged as one
long-format metrics CSV (`ts,node,metric,value,gpu,port`) that the landing path reads like any metrics file.

Queries return raw gauge and counter values on a regular step grid: transforms/metric_events.py computes the deltas
itself (a drop is a reset, the first sample is the baseline), so `increase()`/`rate()` would hide what it needs. Each
query is one `firstfault metric name -> PromQL` entry; the name is what metric_events matches (exporter spellings are
understood as they are), and `{nodes}` in the PromQL becomes a regex matcher on the host label for the attempt's
nodes. One query's failure is reported and the others go on; when the server does not answer at all, the remaining
queries are reported as not queried instead of each waiting out its own retries.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Self
from urllib.parse import urlencode

import polars as pl

from firstfault.config import Config, PrometheusSettings
from firstfault.connectors.base import Report, Staging
from firstfault.connectors.http import ConnectorError, HttpClient, public_url
from firstfault.connectors.static_context import AttemptContext
from firstfault.errors import BadInput

if TYPE_CHECKING:
    import httpx  # the transport's type only: httpx itself is imported when a request is made

SOURCE = "prometheus"
QUERY_PATH = "/api/v1/query_range"
# Prometheus refuses a range query with more than 11,000 steps per series: (end - start) / step <= 11,000
MAX_POINTS = 11_000


def _dcgm(*names: str) -> str:
    """A selector for a DCGM field under its old and new names: a cluster exports one.
    dcgm-exporter names the node in `Hostname` wherever it runs (in Kubernetes `instance` is the exporter pod's IP)."""
    if len(names) == 1:
        return f"DCGM_FI_DEV_{names[0]}{{{{nodes:Hostname}}}}"
    spelled = "|".join(f"DCGM_FI_DEV_{n}" for n in names)
    return f'{{__name__=~"{spelled}",{{nodes:Hostname}}}}'


DEFAULT_QUERIES: dict[str, str] = {
    # DCGM (dcgm-exporter): the metric_events names, plus temperature, power and single-bit ECC as plain series
    "DCGM_FI_DEV_XID_ERRORS": _dcgm("XID_ERRORS", "XID_ERROR"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": _dcgm("ECC_DBE_VOL_TOTAL"),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": _dcgm("ECC_SBE_VOL_TOTAL"),
    "DCGM_FI_DEV_GPU_TEMP": _dcgm("GPU_TEMP", "GPU_TEMP_CELSIUS"),
    "DCGM_FI_DEV_MEMORY_TEMP": _dcgm("MEMORY_TEMP", "MEMORY_TEMP_CELSIUS"),
    "DCGM_FI_DEV_POWER_USAGE": _dcgm("POWER_USAGE", "BOARD_POWER_WATTS"),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": _dcgm("NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "NVLINK_CRC_FLIT_ERROR_TOTAL"),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": _dcgm("NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "NVLINK_CRC_DATA_ERROR_TOTAL"),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": _dcgm("NVLINK_REPLAY_ERROR_COUNT_TOTAL", "NVLINK_REPLAY_ERROR_TOTAL"),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": _dcgm("NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "NVLINK_RECOVERY_ERROR_TOTAL"),
    "DCGM_FI_DEV_GPU_NVLINK_ERRORS": _dcgm("GPU_NVLINK_ERRORS", "NVLINK_ERROR"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": _dcgm("ROW_REMAP_FAILURE", "ROW_REMAP_FAILED"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": _dcgm("UNCORRECTABLE_REMAPPED_ROWS", "ROW_REMAP_UNCORRECTABLE_TOTAL"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": _dcgm("CLOCKS_EVENT_REASONS", "CLOCK_THROTTLE_REASONS"),
    # InfiniBand port counters and states (node_exporter's infiniband collector; labels device, port)
    **{f"node_infiniband_{c}_total": f"node_infiniband_{c}_total{{{{nodes}}}}" for c in (
        "link_downed", "link_error_recovery", "symbol_error", "port_errors_received", "local_link_integrity_errors",
        "excessive_buffer_overrun_errors")},
    "node_infiniband_state_id": "node_infiniband_state_id{{nodes}}",
    "node_infiniband_physical_state_id": "node_infiniband_physical_state_id{{nodes}}",
}
# The placeholder: `{nodes}` matches the configured host label, `{nodes:LABEL}` another one.
_PLACEHOLDER = re.compile(r"\{nodes(?::([A-Za-z_][A-Za-z0-9_]*))?\}")
# Which label names the GPU: the PCI bus id joins kernel and NCCL events (events.gpu), the index and UUID do not.
_GPU_LABELS = ("pci_bus_id", "gpu", "UUID")
_TS_FORMAT = "%Y-%m-%dT%H:%M:%S%.fZ"  # sub-second digits only when there are some


def from_config(config: Config) -> PrometheusConnector | None:
    settings = config.prometheus
    if not settings.url:
        return None
    queries = {**DEFAULT_QUERIES, **settings.queries}
    for metric, promql in queries.items():
        if not isinstance(promql, str):
            raise BadInput("firstfault.toml", f"prometheus.queries.{metric}", "must be a PromQL string (\"\" drops the query)")
    try:
        host = re.compile(settings.host_regex)
    except re.error as e:
        raise BadInput("firstfault.toml", "prometheus.host_regex", f"not a regular expression: {e}") from None
    if host.groups < 1:
        raise BadInput("firstfault.toml", "prometheus.host_regex", "needs a group: its first group is the node name")
    for key in ("step_s", "scrape_interval_s", "lookback_s", "grace_s"):
        if getattr(settings, key) < 0 or (key == "scrape_interval_s" and settings.scrape_interval_s <= 0):
            raise BadInput("firstfault.toml", f"prometheus.{key}", "must be positive" if key == "scrape_interval_s" else "must be >= 0")
    return PrometheusConnector(settings, {m: q for m, q in queries.items() if q})


@dataclass
class PrometheusConnector:
    settings: PrometheusSettings
    queries: dict[str, str]
    transport: httpx.BaseTransport | None = field(default=None, repr=False)  # tests count the requests
    name: str = "prometheus"

    def __post_init__(self) -> None:
        self._host_regex = re.compile(self.settings.host_regex)

    def applies(self, ctx: AttemptContext) -> bool:
        return bool(ctx.nodes) and bool(self.queries)

    def stage(self, ctx: AttemptContext, staging: Staging) -> list[Report]:
        start, end, step = query_window(ctx, self.settings)
        reports: list[Report] = []
        silent: str | None = None  # why the server did not answer; later queries are not sent
        try:
            client = HttpClient(self.settings, self.name, self.transport)
        except ConnectorError as e:  # an unreadable token_file, CA bundle or client certificate
            return [Report(self.name, SOURCE, public_url(self.settings.url), "error", 0, e.reason)]
        with client, _CsvWriter(staging, self.name) as out:
            for metric, promql in self.queries.items():
                query, label = expand_nodes(promql, ctx.nodes, self.settings.host_label)
                uri = f"{public_url(self.settings.url).rstrip('/')}{QUERY_PATH}?" + urlencode(
                    {"query": query, "start": _num(start), "end": _num(end), "step": _num(step)})
                if silent:
                    reports.append(Report(self.name, SOURCE, uri, "error", 0, f"{metric}: not queried: {silent}"))
                    continue
                fetched = _Fetched()
                try:
                    for lo, hi in query_ranges(start, end, step):
                        result = self._query(client, query, lo, hi, step, fetched)
                        for frame in self._series_frames(result, metric, label, fetched):
                            out.write(frame)
                            fetched.rows += frame.height
                except ConnectorError as e:
                    if e.unreachable:
                        silent = e.reason
                    reports.append(Report(self.name, SOURCE, uri, "error", fetched.rows, f"{metric}: {e.reason}"))
                    continue
                reports.append(Report(self.name, SOURCE, uri, "ok" if fetched.rows else "empty", fetched.rows,
                                      f"{metric}: {fetched.reason(step)}"))
        return reports

    def _query(self, client: HttpClient, query: str, start: float, end: float, step: float, fetched: _Fetched) -> list:
        params = {"query": query, "start": _num(start), "end": _num(end), "step": _num(step),
                  "timeout": f"{_num(self.settings.timeout_s)}s"}  # the server gives up when we do
        body = client.get_json(QUERY_PATH, params)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or body.get("status") != "success":
            raise ConnectorError(f"{self.name}: {QUERY_PATH} answered without data: {str(body)[:200]}", 200)
        if data.get("resultType") != "matrix":
            raise ConnectorError(f"{self.name}: expected a range vector (matrix), got {data.get('resultType')!r}", 200)
        fetched.warnings.update(str(w) for w in body.get("warnings") or ())
        return data.get("result") or []

    def _series_frames(self, result: list, metric: str, label: str, fetched: _Fetched) -> Iterator[pl.DataFrame]:
        """One frame per series, its samples converted by polars (values are strings: `NaN`, `+Inf` are possible)."""
        for series in result:
            labels: dict[str, Any] = series.get("metric") or {}
            values = series.get("values")
            host = labels.get(label)
            if not values or host is None:  # native histograms have no `values`; aggregations may drop the label
                fetched.unplaced += 1
                continue
            fetched.series.add(tuple(sorted(labels.items())))  # a series comes back once per range
            match = self._host_regex.search(host)
            node = match.group(1) if match and match.group(1) else host
            try:
                frame = pl.DataFrame(values, schema=[("t", pl.Float64), ("v", pl.String)], orient="row")
            except (pl.exceptions.PolarsError, TypeError, ValueError) as e:
                raise ConnectorError(f"{self.name}: samples of {labels} are not [time, value] pairs: {e}", 200) from None
            yield frame.select(
                ts=pl.from_epoch((pl.col("t") * 1000).round().cast(pl.Int64), time_unit="ms"),
                node=pl.lit(node),
                metric=pl.lit(metric),
                value=pl.col("v").cast(pl.Float64, strict=False),
                gpu=pl.lit(gpu_label(labels), pl.String),
                port=pl.lit(port_label(labels), pl.String),
            ).filter(pl.col("value").is_finite())


@dataclass
class _Fetched:
    rows: int = 0
    series: set[tuple] = field(default_factory=set)
    unplaced: int = 0  # series without samples or without the host label
    warnings: set[str] = field(default_factory=set)

    def reason(self, step: float) -> str:
        notes = [f"{len(self.series)} series, step {_num(step)} s" if self.series else "no series for these nodes"]
        if self.unplaced:
            notes.append(f"{self.unplaced} series without the host label or samples skipped")
        notes += [f"warning: {w}" for w in sorted(self.warnings)]
        return "; ".join(notes)


class _CsvWriter:
    """The staged CSV, opened at the first series (no file when nothing matched), header written once."""

    def __init__(self, staging: Staging, connector: str):
        self.staging, self.connector = staging, connector
        self.file: IO[bytes] | None = None

    def write(self, frame: pl.DataFrame) -> None:
        first = self.file is None
        if first:
            self.file = self.staging.open_metrics(self.connector, "metrics.csv")
        frame.write_csv(self.file, include_header=first, datetime_format=_TS_FORMAT)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        if self.file is not None:
            self.file.close()


def query_window(ctx: AttemptContext, settings: PrometheusSettings) -> tuple[float, float, float]:
    """(start, end, step) in unix seconds: the attempt's window widened by lookback/grace (an attempt still running
    ends now), on a grid of the step. Step 0 = the finest step not under the scrape interval that keeps the window
    within Prometheus' points limit in one request (two steps spare for the grid alignment)."""
    end_time = ctx.end or datetime.now(UTC)
    start = ctx.start.timestamp() - settings.lookback_s
    end = end_time.timestamp() + settings.grace_s
    step = settings.step_s or max(settings.scrape_interval_s, math.ceil((end - start) / (MAX_POINTS - 2)))
    return math.floor(start / step) * step, math.ceil(end / step) * step, step


def query_ranges(start: float, end: float, step: float) -> list[tuple[float, float]]:
    """[start, end] split into consecutive ranges of at most MAX_POINTS steps on the same grid (no sample twice)."""
    ranges = []
    lo = start
    while lo <= end:
        hi = min(end, lo + MAX_POINTS * step)
        ranges.append((lo, hi))
        lo = hi + step
    return ranges


def expand_nodes(promql: str, nodes: tuple[str, ...], host_label: str) -> tuple[str, str]:
    """The query with each `{nodes}` / `{nodes:LABEL}` replaced by a regex matcher for the nodes, and the label that
    names the node in its answer (the first placeholder's, else the configured host label). The regex also matches
    the node followed by `:port` or a domain (`node-01:9100`, `node-01.cluster:9100`); a raw (backtick) string keeps
    the escapes as RE2 reads them."""
    alternatives = "|".join(re.escape(n) for n in sorted(set(nodes)))
    regex = f"(?:{alternatives})(?:[.:].*)?"
    labels = [m.group(1) or host_label for m in _PLACEHOLDER.finditer(promql)]
    query = _PLACEHOLDER.sub(lambda m: f"{m.group(1) or host_label}=~`{regex}`", promql)
    return query, labels[0] if labels else host_label


def gpu_label(labels: dict[str, Any]) -> str | None:
    gpu = next((labels[k] for k in _GPU_LABELS if labels.get(k)), None)
    instance = labels.get("GPU_I_ID")
    # MIG instances of one GPU are separate series: keep them apart (their counters must not be diffed together)
    return f"{gpu}/{instance}" if gpu is not None and instance else gpu


def port_label(labels: dict[str, Any]) -> str | None:
    """`mlx5_0:1` from node_exporter's device and port labels; a bare port number or HCA name when only one is given.
    (dcgm-exporter's `device` is the GPU, `nvidia3`: a series with a GPU has no port.)"""
    device, port = labels.get("device"), labels.get("port")
    if port:
        return f"{device}:{port}" if device else str(port)
    if device and not any(labels.get(k) for k in _GPU_LABELS):
        return str(device)
    return None


def _num(x: float) -> str:
    """Seconds as Prometheus reads them: integral values without a fraction."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))
