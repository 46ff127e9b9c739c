"""Metric samples -> events (DESIGN.md §3): only the anomalies, so the rules and the evidence trail work on events.

Input: the landed `metrics` rows (attempt_id, ts, node, metric, value, gpu, port, source, uri, line), long format.
Every series is one (attempt_id, node, metric, gpu, port), ordered by ts; all work is window expressions over those
series (no per-row Python). Metric names are matched case-insensitively after removing the usual prefixes and
suffixes (`DCGM_FI_DEV_`, `node_infiniband_`, `infiniband_port_`, `infiniband_`, `ib_`, `_total`), and both DCGM
spellings (old/new field names) map to one internal name.

Kinds:

* ``ib_counter``     a positive delta of an InfiniBand error counter; code = delta, code_text = canonical counter
                     (`link_downed`, `link_error_recovery`, `symbol_error`, `port_rcv_errors`,
                     `local_link_integrity_errors`, `excessive_buffer_overrun_errors`). A drop (reset/wrap) is no error.
* ``ib_port_down`` / ``ib_port_up``  transitions of a port state series (`state`/`port_state`/`state_id`: 4 = ACTIVE;
                     `phys_state`/`physical_state_id`: 5 = LinkUp); code = the new state, code_text = the series.
* ``ib_port_flap``   a down transition followed by an up transition (emitted on the up sample);
                     fields.outage_s, fields.down_ts.
* ``dcgm_xid``       `DCGM_FI_DEV_XID_ERRORS` (gauge of the LAST Xid) changing to a non-zero value; code = Xid.
* ``dcgm_nvlink_errors``  delta of an NVLink CRC/replay/recovery error counter; code = delta.
* ``dcgm_ecc_dbe``   delta of the volatile/aggregate double-bit ECC counters; code = delta.
* ``dcgm_row_remap`` `ROW_REMAP_FAILURE` becoming non-zero (code_text `failure`) or a delta of the uncorrectable
                     remapped rows (code_text `uncorrectable`); code = value / delta.
* ``gpu_throttle``   a sample of the clock-event reasons bitmask with a hardware/thermal bit (0x8 HW slowdown,
                     0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake); code = mask, code_text thermal|power,
                     fields.run = the position of the sample in its run of consecutive throttled samples.

Deltas need a previous sample in the same series: the first sample is the baseline, never an event.
Every event: source "metrics", uri + line of the CSV row, locator {"series", "sample_time"}, raw = the CSV row
reconstructed, ts_quality "exact", event_id `metrics:<file index>:<line>:<kind>` (file index = rank of the uri
among the attempt's metric files).
"""
from __future__ import annotations

import polars as pl

from firstfault.schema import conform_events
from firstfault.transforms.extract import normalize_gpu

__all__ = ["metric_events", "IB_COUNTERS"]

IB_COUNTERS = (
    "link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
# other spellings (node_exporter) -> canonical counter
_IB_ALIASES = {"port_errors_received": "port_rcv_errors"}
_PORT_STATE = {"state": 4, "port_state": 4, "state_id": 4, "phys_state": 5, "physical_state_id": 5}
_NVLINK = {
    f"nvlink_{k}_error_{t}" for k in ("crc_flit", "crc_data", "replay", "recovery") for t in ("count_total", "total")
} | {"gpu_nvlink_errors", "nvlink_error"}
_ECC_DBE = {"ecc_dbe_vol_total", "ecc_dbe_agg_total"}
_XID = {"xid_errors", "xid_error"}
_REMAP_FAIL = {"row_remap_failure", "row_remap_failed"}
_REMAP_UNC = {"uncorrectable_remapped_rows", "row_remap_uncorrectable_total"}
_THROTTLE = {"clock_throttle_reasons", "clocks_event_reasons"}
_SERIES = ["attempt_id", "node", "metric", "gpu", "port"]


def _strip(name: pl.Expr) -> pl.Expr:
    """Lower-case name without exporter prefixes (keeps DCGM's `_total` suffixes: they are part of the field name)."""
    n = name.str.strip_chars().str.to_lowercase()
    return n.str.replace(r"^dcgm_fi_dev_", "").str.replace(r"^(node_infiniband_|infiniband_port_|infiniband_|ib_)", "")


def metric_events(metrics: pl.LazyFrame) -> pl.LazyFrame:
    names = metrics.collect_schema().names()
    lf = metrics.with_columns(
        [pl.lit(None, pl.String).alias(c) for c in ("gpu", "port", "source", "uri") if c not in names]
        + ([pl.lit(None, pl.Int64).alias("line")] if "line" not in names else [])
    )
    short = _strip(pl.col("metric"))
    ib_name = short.str.replace(r"_total$", "").replace(_IB_ALIASES)
    lf = (
        lf.filter(pl.col("value").is_not_null() & pl.col("ts").is_not_null())
        .with_columns(
            _short=short,
            _ib=pl.when(pl.col("metric").str.to_lowercase().str.starts_with("dcgm_")).then(None).otherwise(ib_name),
            _file=(pl.col("uri").rank("dense").over("attempt_id") - 1).cast(pl.Int64),
        )
        .sort([*_SERIES, "ts", "line"], nulls_last=True)
        .with_columns(
            _prev=pl.col("value").shift(1).over(_SERIES),
            _prev_ts=pl.col("ts").shift(1).over(_SERIES),
        )
        .with_columns(_delta=pl.col("value") - pl.col("_prev"))
    )
    positive = pl.col("_prev").is_not_null() & (pl.col("_delta") > 0)
    delta_code = pl.col("_delta").round(0).cast(pl.Int64)

    # port state: up/down per sample, transitions, and the start of the current outage carried forward
    # a bare `state` series is a port state only when it names a port or carries an InfiniBand prefix
    ib_named = pl.col("port").is_not_null() | pl.col("metric").str.to_lowercase().str.contains(r"^(node_infiniband_|infiniband|ib_)")
    active = pl.when(ib_named).then(pl.col("_ib").replace_strict(_PORT_STATE, default=None, return_dtype=pl.Float64))
    is_up = pl.col("value") == active
    was_up = pl.col("_prev") == active
    ports = (
        lf.filter(active.is_not_null())
        .with_columns(_down_edge=pl.col("_prev").is_not_null() & was_up & ~is_up,
                      _up_edge=pl.col("_prev").is_not_null() & ~was_up & is_up)
        .with_columns(_down_ts=pl.when(pl.col("_down_edge")).then(pl.col("ts")).forward_fill().over(_SERIES))
    )
    state_code = pl.col("value").round(0).cast(pl.Int64)
    port_events = [
        ports.filter(pl.col("_down_edge")).with_columns(
            kind=pl.lit("ib_port_down"), code=state_code, code_text=pl.col("_ib"), severity=pl.lit("error"),
            _what=pl.format("{} left the active state ({} -> {})", pl.col("_ib"), _num(pl.col("_prev")), _num(pl.col("value"))),
            _fields=_fields(series=pl.col("_ib"), prev_value=pl.col("_prev"), value=pl.col("value")),
        ),
        ports.filter(pl.col("_up_edge")).with_columns(
            kind=pl.lit("ib_port_up"), code=state_code, code_text=pl.col("_ib"), severity=pl.lit("info"),
            _what=pl.format("{} active again", pl.col("_ib")),
            _fields=_fields(series=pl.col("_ib"), prev_value=pl.col("_prev"), value=pl.col("value")),
        ),
        ports.filter(pl.col("_up_edge") & pl.col("_down_ts").is_not_null()).with_columns(
            kind=pl.lit("ib_port_flap"), code=state_code, code_text=pl.col("_ib"), severity=pl.lit("error"),
            _what=pl.format("port flap: {} down for {} s", pl.col("_ib"),
                            ((pl.col("ts") - pl.col("_down_ts")).dt.total_milliseconds() / 1000).round(1)),
            _fields=_fields(
                series=pl.col("_ib"),
                outage_s=((pl.col("ts") - pl.col("_down_ts")).dt.total_milliseconds() / 1000).round(3),
                down_ts=pl.col("_down_ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ"),
            ),
        ),
    ]

    def counter(cond: pl.Expr, kind: str, code_text: pl.Expr, severity: str) -> pl.LazyFrame:
        return lf.filter(cond & positive).with_columns(
            kind=pl.lit(kind), code=delta_code, code_text=code_text, severity=pl.lit(severity),
            _what=pl.format("{} +{}", pl.col("metric"), delta_code),
            _fields=_fields(counter=code_text, prev_value=pl.col("_prev"), value=pl.col("value"),
                              prev_ts=pl.col("_prev_ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ")),
        )

    mask = pl.col("value").round(0).cast(pl.Int64, strict=False)
    thermal = (mask & 0x60) != 0
    power = (mask & 0x80) != 0
    hw_slow = (mask & 0x8) != 0
    throttled = pl.col("_short").is_in(list(_THROTTLE)) & (thermal | power | hw_slow)
    throttle_series = lf.filter(pl.col("_short").is_in(list(_THROTTLE))).with_columns(_thr=thermal | power | hw_slow)
    run_id = (pl.col("_thr") != pl.col("_thr").shift(1)).fill_null(True).cum_sum().over(_SERIES)
    throttle = (
        throttle_series.with_columns(_run=run_id)
        .with_columns(_pos=pl.int_range(1, pl.len() + 1).over([*_SERIES, "_run"]))
        .filter(throttled)
        .with_columns(
            kind=pl.lit("gpu_throttle"), code=mask,
            code_text=pl.when(thermal).then(pl.lit("thermal")).when(power).then(pl.lit("power")).otherwise(pl.lit("thermal")),
            severity=pl.lit("warning"),
            _what=pl.format("clock event reasons {}", mask),
            _fields=_fields(mask=mask, hw_slowdown=hw_slow, sw_thermal=(mask & 0x20) != 0, hw_thermal=(mask & 0x40) != 0,
                              hw_power_brake=power, run=pl.col("_pos")),
        )
    )

    frames = [
        counter(pl.col("_ib").is_in(list(IB_COUNTERS)), "ib_counter", pl.col("_ib"),
                "error").with_columns(severity=pl.when(pl.col("_ib") == "link_downed").then(pl.lit("error")).otherwise(pl.lit("warning"))),
        *port_events,
        lf.filter(pl.col("_short").is_in(list(_XID)) & pl.col("_prev").is_not_null() & (pl.col("_delta") != 0)
                  & (pl.col("value") > 0)).with_columns(
            kind=pl.lit("dcgm_xid"), code=pl.col("value").round(0).cast(pl.Int64), code_text=pl.lit(None, pl.String),
            severity=pl.lit("error"), _what=pl.format("DCGM last Xid changed to {}", pl.col("value").round(0).cast(pl.Int64)),
            _fields=_fields(prev_value=pl.col("_prev"), value=pl.col("value")),
        ),
        counter(pl.col("_short").is_in(list(_NVLINK)), "dcgm_nvlink_errors", pl.col("_short"), "error"),
        counter(pl.col("_short").is_in(list(_ECC_DBE)), "dcgm_ecc_dbe", pl.col("_short"), "error"),
        counter(pl.col("_short").is_in(list(_REMAP_UNC)), "dcgm_row_remap", pl.lit("uncorrectable"), "error"),
        lf.filter(pl.col("_short").is_in(list(_REMAP_FAIL)) & (pl.col("value") > 0)
                  & (pl.col("_prev").is_null() | (pl.col("_prev") == 0))).with_columns(
            kind=pl.lit("dcgm_row_remap"), code=pl.col("value").round(0).cast(pl.Int64), code_text=pl.lit("failure"),
            severity=pl.lit("error"), _what=pl.lit("row remap failure"),
            _fields=_fields(prev_value=pl.col("_prev"), value=pl.col("value")),
        ),
        throttle,
    ]
    cols = [*_SERIES, "ts", "value", "source", "uri", "line", "_file", "kind", "code", "code_text", "severity", "_what", "_fields"]
    out = pl.concat([f.select(cols) for f in frames], how="vertical_relaxed")
    return _finish(out)


def _fields(**exprs: pl.Expr) -> pl.Expr:
    """fields JSON: the kind's own values plus the metric name and a DCGM gpu index label (`gpu=3`) when given."""
    gpu_index = pl.when(pl.col("gpu").str.contains(r"^\d+$")).then(pl.col("gpu"))
    return pl.struct(metric=pl.col("metric"), **exprs, gpu_index=gpu_index).struct.json_encode()


def _num(e: pl.Expr) -> pl.Expr:
    """A float as the CSV would print it: integral values without a fraction."""
    return pl.when(e == e.round(0)).then(e.round(0).cast(pl.Int64).cast(pl.String)).otherwise(e.cast(pl.String))


def _finish(out: pl.LazyFrame) -> pl.LazyFrame:
    port_label = pl.col("port").str.strip_chars()
    only_digits = port_label.str.contains(r"^\d+$")
    device = pl.when(only_digits).then(None).otherwise(port_label.str.replace(r":\d+$", "")).replace("", None)
    port_no = pl.when(only_digits).then(port_label).otherwise(port_label.str.extract(r":(\d+)$", 1)).cast(pl.Int32, strict=False)
    gpu_norm = normalize_gpu(pl.col("gpu"))
    iso = pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ")
    labels = pl.concat_str(
        [pl.format("node={}", pl.col("node")), pl.format("gpu={}", pl.col("gpu")), pl.format("port={}", pl.col("port"))],
        separator=",", ignore_nulls=True,
    )
    series = pl.concat_str([pl.col("metric"), pl.lit("{"), labels, pl.lit("}")])
    raw = pl.concat_str(
        [iso, pl.col("node"), pl.col("metric"), _num(pl.col("value")), pl.col("gpu").fill_null(""), pl.col("port").fill_null("")],
        separator=",",
    )
    message = pl.concat_str(
        [pl.col("_what"), pl.lit(" on "), pl.col("node"),
         pl.when(pl.col("gpu").is_not_null()).then(pl.concat_str([pl.lit(" gpu "), pl.col("gpu")])).otherwise(pl.lit("")),
         pl.when(pl.col("port").is_not_null()).then(pl.concat_str([pl.lit(" port "), pl.col("port")])).otherwise(pl.lit(""))]
    )
    framed = out.with_columns(
        gpu=gpu_norm,
        device=device,
        port=port_no,
        ts_quality=pl.lit("exact"),
        message=message,
        source=pl.col("source").fill_null("metrics"),
        locator=pl.struct(series=series, sample_time=iso).struct.json_encode(),
        raw=raw,
        fields=pl.col("_fields"),
        event_id=pl.format("metrics:{}:{}:{}", pl.col("_file").fill_null(0), pl.col("line").fill_null(0), pl.col("kind")),
    )
    return conform_events(framed).unique("event_id", keep="first", maintain_order=True)
