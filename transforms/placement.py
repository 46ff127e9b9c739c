"""Give every line its node and rank, from the file, its prefixes and the attempt's rank map."""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class NodeMajor:
    """The default rank map of an attempt without listed ranks: rank = node index x gpus_per_node + local rank. Placed
    by arithmetic and one entry per node, never a lookup entry per rank."""
    gpus_per_node: int


def host_aliases(nodes: Sequence[str]) -> dict[str, str]:
    """alias -> node: the node name itself and its short host name (`node-02.example.com` -> `node-02`), lower-case."""
    aliases: dict[str, str] = {}
    for n in nodes:
        aliases.setdefault(n.lower(), n)
        aliases.setdefault(n.split(".")[0].lower(), n)
    return aliases


def resolve_host(expr: pl.Expr, aliases: Mapping[str, str], prefix: pl.Expr | None = None, *,
                 keep_unknown: bool = True) -> pl.Expr:
    """A host name -> the node it names (exact or short name, any case); an unknown host keeps its own name, or is
    null without `keep_unknown`. `aliases` maps names to nodes (`host_aliases`); when it holds the aliases of
    several attempts, each key starts with its attempt's prefix and `prefix` gives each line's."""
    lower = expr.str.to_lowercase()

    def lookup(name: pl.Expr) -> pl.Expr:
        return (name if prefix is None else prefix + name).replace_strict(aliases, default=None, return_dtype=pl.String)

    return pl.coalesce(lookup(lower), lookup(lower.str.split(".").list.first()), *((expr,) if keep_unknown else ()))


RankMap = Sequence[tuple[int, str, int]] | NodeMajor


def place_lines(
    lf: pl.LazyFrame,
    *,
    nodes: Sequence[str],
    rank_map: RankMap,
    file_node: str | None | pl.Expr,
    file_rank: int | None | pl.Expr,
    label_mode: str | pl.Expr,
) -> pl.LazyFrame:
    """Add `node`, `rank`, `local_rank` to the lines of one attempt (see `place_attempt_lines`)."""
    return place_attempt_lines(lf, [(nodes, rank_map)], pl.lit(0, pl.Int64), file_node=file_node, file_rank=file_rank,
                               label_mode=label_mode)


# Integer lookup keys of several attempts: attempt index * _SPAN + rank (or srun label); both stay below 2**31.
_SPAN = 1 << 32


def place_attempt_lines(
    lf: pl.LazyFrame,
    attempts: Sequence[tuple[Sequence[str], RankMap]],
    attempt: pl.Expr,
    *,
    file_node: str | None | pl.Expr,
    file_rank: int | None | pl.Expr,
    label_mode: str | pl.Expr,
    present: Collection[str] | None = None,
    file_nodes_everywhere: bool = False,
) -> pl.LazyFrame:
    """Add `node`, `rank`, `local_rank` from srun labels, pdsh hosts, MPI/torchrun tags, `[rankN]:` and NCCL
    prefixes, the file and the rank map.

    `attempts` holds each attempt's (nodes, rank map); `attempt` gives each line's index into it, so the lines of
    many attempts are placed in one frame (a plan costs the same whatever the number of attempts).

    Precedence for the rank: `[rankN]:` > MPI tag > srun label (when labels are ranks) > the local rank (torchrun
    tag, else NCCL `[dev]`) on its node > file name. Node: the file's node > pdsh host (only one of the attempt's
    nodes) > NCCL host > srun label (when labels are node indexes) > the rank's node > syslog host. A local rank
    alone never names a node. `present`: the prefix columns that hold a value on some line (None: any may); the
    lookups of the others are left out, and so are those of the node when `file_nodes_everywhere` (every line's
    file names its node).
    """
    # Lookups are keyed by attempt: `i#name` and i * _SPAN + number. With one attempt the keys are the plain values
    # (cheaper: no key string per line).
    single = len(attempts) == 1
    attempt = attempt.cast(pl.Int64)
    prefix = attempt.cast(pl.String) + "#"

    def int_key(i: int, value: int) -> int:
        return value if single else i * _SPAN + value

    def str_key(i: int, value: str) -> str:
        return value if single else f"{i}#{value}"

    def keyed(value: pl.Expr) -> pl.Expr:
        return value.cast(pl.Int64) if single else attempt * _SPAN + value.cast(pl.Int64)

    def keyed_str(value: pl.Expr) -> pl.Expr:
        return value if single else prefix + value

    aliases, rank_node, rank_local, device_rank, label_node_of = {}, {}, {}, {}, {}
    gpus_of, node_index = {}, {}  # node-major attempts: their gpus_per_node, and each node's index
    for i, (nodes, rank_map) in enumerate(attempts):
        for alias, node in host_aliases(nodes).items():
            aliases[str_key(i, alias)] = node
        label_node_of.update({int_key(i, k): n for k, n in enumerate(nodes)})
        if isinstance(rank_map, NodeMajor):
            gpus_of[i] = rank_map.gpus_per_node
            node_index.update({str_key(i, n): k for k, n in enumerate(nodes)})
            continue
        for r, n, lr in rank_map:
            rank_node[int_key(i, r)] = n
            rank_local[int_key(i, r)] = lr
            device_rank[str_key(i, f"{n}#{lr}")] = r
    # null on the lines of attempts with listed ranks: their node-major terms below are null too
    gpus = (pl.lit(gpus_of.get(0), pl.Int64) if single else attempt.replace_strict(gpus_of, default=None, return_dtype=pl.Int64))

    def node_of_rank(rank: pl.Expr) -> pl.Expr:
        listed = keyed(rank).replace_strict(rank_node, default=None, return_dtype=pl.String)
        # a node index past the last node is no entry of label_node_of: null
        major = keyed(rank.cast(pl.Int64) // gpus).replace_strict(label_node_of, default=None, return_dtype=pl.String)
        return pl.coalesce(listed, pl.when(rank >= 0).then(major))

    def local_of_rank(rank: pl.Expr) -> pl.Expr:
        listed = keyed(rank).replace_strict(rank_local, default=None, return_dtype=pl.Int32)
        return pl.coalesce(listed, pl.when(node_of_rank(rank).is_not_null() & rank.is_not_null() & gpus.is_not_null())
                           .then((rank.cast(pl.Int64) % gpus).cast(pl.Int32)))

    def rank_of_device(node: pl.Expr, device: pl.Expr) -> pl.Expr:
        listed = keyed_str(pl.concat_str(node, pl.lit("#"), device.cast(pl.String))).replace_strict(
            device_rank, default=None, return_dtype=pl.Int32)
        index = keyed_str(node).replace_strict(node_index, default=None, return_dtype=pl.Int64)
        major = pl.when((device >= 0) & (device < gpus)).then(index * gpus + device.cast(pl.Int64)).cast(pl.Int32)
        return pl.coalesce(listed, major)

    def host(expr: pl.Expr, *, keep_unknown: bool = True) -> pl.Expr:
        return resolve_host(expr, aliases, None if single else prefix, keep_unknown=keep_unknown)

    # file-level facts are literals for one file, columns when several files are placed in one frame
    mode = label_mode if isinstance(label_mode, pl.Expr) else pl.lit(label_mode, pl.String)
    file_rank = file_rank if isinstance(file_rank, pl.Expr) else pl.lit(file_rank, pl.Int32)
    file_node = file_node if isinstance(file_node, pl.Expr) else pl.lit(file_node, pl.String)

    def given(column: str) -> bool:
        return present is None or column in present

    label = given("srun_label")
    label_rank = pl.when(mode == "rank").then(pl.col("srun_label"))
    label_node = pl.when(mode == "node").then(
        keyed(pl.col("srun_label")).replace_strict(label_node_of, default=None, return_dtype=pl.String)
    )
    direct_rank = _coalesce([pl.col("rank_prefix")] * given("rank_prefix") + [label_rank] * label + [file_rank], pl.Int32)
    lf = lf.with_columns(_rank_direct=direct_rank).with_columns(
        node=file_node.cast(pl.String) if file_nodes_everywhere else _coalesce(
            [file_node.cast(pl.String)]
            # decorations take a pdsh host only when it names a node of some attempt of the pass; it must name one
            # of this line's attempt
            + [host(pl.col("launcher_host"), keep_unknown=False)] * given("launcher_host")
            + [host(pl.col("nccl_host"))] * given("nccl_host")
            + [label_node] * label
            + [node_of_rank(pl.col("_rank_direct"))]
            + [host(pl.col("syslog_host"))] * given("syslog_host"),
            pl.String,
        )
    )
    # torchrun's tag is the local rank itself; NCCL's `[dev]` is the CUDA device, the local rank as launchers set it
    device = _coalesce([pl.col(c) for c in ("local_rank_prefix", "nccl_dev") if given(c)], pl.Int32)
    by_device = given("local_rank_prefix") or given("nccl_dev")
    return lf.with_columns(
        rank=_coalesce([pl.col("_rank_direct")] + [rank_of_device(pl.col("node"), device)] * by_device, pl.Int32),
        local_rank=_coalesce([local_of_rank(pl.col("_rank_direct"))] + [device] * by_device, pl.Int32),
    ).drop("_rank_direct")


def _coalesce(terms: list[pl.Expr], dtype: pl.DataType) -> pl.Expr:
    return pl.coalesce(terms).cast(dtype) if terms else pl.lit(None, dtype)
