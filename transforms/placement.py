"""Give every line its node and rank, from the file, its prefixes and the attempt's rank map."""
from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def host_aliases(nodes: Sequence[str]) -> pl.DataFrame:
    """alias -> node: the node name itself and its short host name (`node-02.example.com` -> `node-02`)."""
    rows = {}
    for n in nodes:
        rows.setdefault(n.lower(), n)
        rows.setdefault(n.split(".")[0].lower(), n)
    return pl.DataFrame({"alias": list(rows), "alias_node": list(rows.values())}, schema={"alias": pl.String, "alias_node": pl.String})


def resolve_host(expr: pl.Expr, aliases: pl.DataFrame) -> pl.Expr:
    """Map a host name to a node of the list (exact or short name); unknown hosts keep their own name."""
    short = expr.str.to_lowercase().str.split(".").list.first()
    mapping = dict(zip(aliases["alias"], aliases["alias_node"]))
    return pl.coalesce(
        expr.str.to_lowercase().replace_strict(mapping, default=None, return_dtype=pl.String),
        short.replace_strict(mapping, default=None, return_dtype=pl.String),
        expr,
    )


def place_lines(
    lf: pl.LazyFrame,
    *,
    nodes: Sequence[str],
    rank_map: Sequence[tuple[int, str, int]],
    file_node: str | None | pl.Expr,
    file_rank: int | None | pl.Expr,
    label_mode: str | pl.Expr,
) -> pl.LazyFrame:
    """Add `node`, `rank`, `local_rank` from srun labels, `[rankN]:` and NCCL prefixes, the file and the rank map.

    Precedence for the rank: `[rankN]:` > srun label (when labels are ranks) > NCCL `[dev]` on its node > file name.
    Node: the file's node > NCCL host > srun label (when labels are node indexes) > the rank's node > syslog host.
    """
    aliases = host_aliases(nodes)
    rank_node = {r: n for r, n, _ in rank_map}
    rank_local = {r: lr for r, _, lr in rank_map}
    device_rank = {f"{n}#{lr}": r for r, n, lr in rank_map}
    # file-level facts are literals for one file, columns when several files are placed in one frame
    mode = label_mode if isinstance(label_mode, pl.Expr) else pl.lit(label_mode, pl.String)
    file_rank = file_rank if isinstance(file_rank, pl.Expr) else pl.lit(file_rank, pl.Int32)
    file_node = file_node if isinstance(file_node, pl.Expr) else pl.lit(file_node, pl.String)
    label_rank = pl.when(mode == "rank").then(pl.col("srun_label"))
    label_node = pl.when(mode == "node").then(
        pl.col("srun_label").replace_strict(dict(enumerate(nodes)), default=None, return_dtype=pl.String)
    )
    direct_rank = pl.coalesce(pl.col("rank_prefix"), label_rank, file_rank).cast(pl.Int32)
    lf = lf.with_columns(_rank_direct=direct_rank).with_columns(
        node=pl.coalesce(
            file_node.cast(pl.String),
            resolve_host(pl.col("nccl_host"), aliases),
            label_node,
            pl.col("_rank_direct").replace_strict(rank_node, default=None, return_dtype=pl.String),
            resolve_host(pl.col("syslog_host"), aliases),
        )
    )
    device_key = pl.concat_str(pl.col("node"), pl.lit("#"), pl.col("nccl_dev").cast(pl.String))
    return lf.with_columns(
        rank=pl.coalesce(pl.col("_rank_direct"), device_key.replace_strict(device_rank, default=None, return_dtype=pl.Int32)),
        local_rank=pl.coalesce(
            pl.col("_rank_direct").replace_strict(rank_local, default=None, return_dtype=pl.Int32), pl.col("nccl_dev")
        ).cast(pl.Int32),
    ).drop("_rank_direct")
