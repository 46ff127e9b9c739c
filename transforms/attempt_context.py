"""The attempt itself as data: its context row for the lake, and the GPU model its logs name when the scheduler gave
none."""
from __future__ import annotations

import json
from datetime import timezone
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from firstfault.schema import CONTEXT_SCHEMA

if TYPE_CHECKING:  # the attempt facts read here; transforms do not import connectors at run time
    from firstfault.connectors.static_context import AttemptContext


def logged_gpu_models(events: pl.DataFrame) -> dict[str | None, str]:
    """Per attempt, the model token (`H100`) that most of its `gpu_model` events name; ties go to the
    alphabetically first, so landing the same logs again gives the same model."""
    counted = (
        events.lazy().filter(pl.col("kind") == "gpu_model")
        .select("attempt_id", pl.col("fields").str.json_path_match("$.model").alias("model")).drop_nulls("model")
        .group_by("attempt_id", "model").len().sort(["attempt_id", "len", "model"], descending=[False, True, False], nulls_last=True)
        .group_by("attempt_id", maintain_order=True).first().collect()
    )
    return dict(zip(counted.get_column("attempt_id").to_list(), counted.get_column("model").to_list()))


def context_table(ctx: AttemptContext, logged_gpu_model: str | None = None) -> pa.Table:
    """The context row; `logged_gpu_model` (from the attempt's logs) stands in when the scheduler gave no GPU model.
    `rank_map` holds the listed `ranks` only: the node-major default follows from `nodes` and `gpus_per_node` (the
    rules' `rank_nodes` view), so nothing is written per rank of a default map."""
    def utc(t):
        return None if t is None else t.astimezone(timezone.utc).replace(tzinfo=None)

    row = {
        "attempt_id": ctx.attempt_id, "cluster": ctx.cluster, "workload_id": ctx.workload_id, "attempt": ctx.attempt,
        "state": ctx.state, "exit_code": ctx.exit_code, "start_ts": utc(ctx.start), "end_ts": utc(ctx.end),
        "timezone": ctx.timezone, "gpu_model": ctx.gpu_model or logged_gpu_model, "gpus_per_node": ctx.gpus_per_node,
        "nodes": list(ctx.nodes), "rank_map": json.dumps(ctx.ranks) if ctx.ranks else None, "spec_uri": ctx.spec_uri,
    }
    return pa.Table.from_pylist([row], CONTEXT_SCHEMA)
