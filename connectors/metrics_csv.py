"""Metrics CSV in long format: ts,node,metric,value[,gpu][,port]. Bad rows are counted and skipped."""
from __future__ import annotations

import io
from dataclasses import dataclass

import fsspec
import polars as pl

from firstfault.connectors.static_context import AttemptContext
from firstfault.schema import METRICS_SCHEMA

REQUIRED = ("ts", "node", "metric", "value")


@dataclass
class MetricsReport:
    status: str
    reason: str | None


def read_metrics(uri: str, ctx: AttemptContext) -> tuple[pl.DataFrame, MetricsReport]:
    try:
        with fsspec.open(uri, "rb", compression="infer") as f:
            data = f.read()
        raw = pl.read_csv(io.BytesIO(data), infer_schema=False, encoding="utf8-lossy", truncate_ragged_lines=True)
    except (OSError, pl.exceptions.PolarsError, EOFError) as e:
        return pl.DataFrame(schema=METRICS_SCHEMA), MetricsReport("error", f"{type(e).__name__}: {e}")
    absent = [c for c in REQUIRED if c not in raw.columns]
    if absent:
        return pl.DataFrame(schema=METRICS_SCHEMA), MetricsReport("error", f"missing column(s): {', '.join(absent)}")
    for optional in ("gpu", "port"):
        if optional not in raw.columns:
            raw = raw.with_columns(pl.lit(None, pl.String).alias(optional))
    parsed = raw.with_row_index("line", offset=2).select(
        ts=_parse_ts(pl.col("ts"), ctx.timezone),
        node=pl.col("node").str.strip_chars(),
        metric=pl.col("metric").str.strip_chars(),
        value=pl.col("value").str.strip_chars().cast(pl.Float64, strict=False),
        gpu=pl.col("gpu"),
        port=pl.col("port"),
        source=pl.lit("metrics"),
        uri=pl.lit(uri),
        line=pl.col("line").cast(pl.Int64),
    )
    good = parsed.drop_nulls(subset=["ts", "node", "metric", "value"])
    bad = parsed.height - good.height
    return good, MetricsReport("ok" if good.height else "empty", f"{bad} malformed rows skipped" if bad else None)


def _parse_ts(col: pl.Expr, tz: str) -> pl.Expr:
    """ISO 8601 (with or without zone; zone-less means the attempt's zone) or epoch seconds."""
    text = col.str.strip_chars().str.replace(r"^(\d{4}-\d\d-\d\d) ", "${1}T").str.replace(r"Z$", "+00:00")
    with_zone = text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone("UTC")
    naive = (
        text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )
    epoch = pl.from_epoch(text.cast(pl.Float64, strict=False).mul(1e6).cast(pl.Int64, strict=False), time_unit="us")
    return pl.coalesce(with_zone.dt.replace_time_zone(None), naive.dt.replace_time_zone(None), epoch)
