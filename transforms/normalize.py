"""Line normalisation: strip each line's decorations, stamp it in UTC and place it on a node and rank, for the lines
of several attempts in one polars plan per time zone (docs/DESIGN.md §7)."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import polars as pl

from firstfault.transforms.decorations import strip_decorations
from firstfault.transforms.fixed_formats import strip_by_format
from firstfault.transforms.placement import NodeMajor, host_aliases, place_attempt_lines
from firstfault.transforms.timestamps import local_window, parse_timestamps

if TYPE_CHECKING:  # the attempt facts read here; transforms do not import connectors at run time
    from firstfault.connectors.static_context import AttemptContext


def normalize_lines(ctxs: Sequence[AttemptContext], lines: pl.DataFrame, *, fast: bool = True) -> pl.DataFrame:
    """Strip, stamp and place the lines of the attempts `ctxs` (each line's `_attempt` indexes them), in one plan
    per time zone (the attempts of a fleet mostly share one). `attempt_id` is left to the caller (a literal per
    attempt costs nothing; a column built per line does). The lines of files with a known format (`_format`, from
    `fixed_formats.detect_format`) are cut at fixed positions unless `fast` is off; the result is the same."""
    present = sorted(lines.get_column("_attempt").unique().to_list()) or [0]  # no lines left: still the columns
    by_zone: dict[str, list[int]] = {}
    for position in present:
        by_zone.setdefault(ctxs[position].timezone, []).append(position)
    parts = [_normalize_zone(ctxs, lines if len(by_zone) == 1 else lines.filter(pl.col("_attempt").is_in(positions)), tz,
                             positions, fast).collect()
             for tz, positions in by_zone.items()]
    if len(parts) == 1:
        return parts[0]
    return pl.concat(parts, how="vertical").sort(["_file", "line"], maintain_order=True)


def _stripped(lines: pl.DataFrame, fast: bool, hosts: Sequence[str]) -> pl.LazyFrame:
    """`strip_decorations` of the lines, those of known formats cut at fixed positions (fixed_formats.py)."""
    if not fast or "_format" not in lines.columns or lines.get_column("_format").null_count() == lines.height:
        return strip_decorations(lines.drop("_format", strict=False).lazy(), hosts)
    return strip_by_format(lines, hosts).lazy()


def _normalize_zone(ctxs: Sequence[AttemptContext], lines: pl.DataFrame, tz: str, positions: list[int],
                    fast: bool) -> pl.LazyFrame:
    # a pdsh host prefix is taken only when it names a node of these attempts (decorations._launcher_label)
    hosts = sorted({alias for i in positions for alias in host_aliases(ctxs[i].nodes)})
    stripped = _stripped(lines, fast, hosts).collect()
    # the stamp forms and prefixes no line has are not parsed: a batch of one format has few of them
    present = {c for c in stripped.columns if stripped.get_column(c).null_count() < stripped.height}
    lf = stripped.lazy()
    if len(positions) == 1:  # one attempt: its facts are literals, cheaper than per-line lookups
        ctx = ctxs[positions[0]]
        lf = parse_timestamps(lf, tz=tz, window_start=ctx.start, window_end=ctx.end or ctx.start, present=present)
        rosters, attempt = [_roster(ctx)], pl.lit(0, pl.Int64)
    else:
        def per_attempt(values: dict[int, datetime]) -> pl.Expr:
            return pl.col("_attempt").replace_strict(values, default=None, return_dtype=pl.Datetime("us"))

        lf = parse_timestamps(lf, tz=tz, window_start=per_attempt({i: local_window(ctxs[i].start, tz) for i in positions}),
                              window_end=per_attempt({i: local_window(ctxs[i].end or ctxs[i].start, tz) for i in positions}),
                              present=present)
        rosters, attempt = [_roster(c) for c in ctxs], pl.col("_attempt")
    lf = place_attempt_lines(lf, rosters, attempt, file_node=pl.col("_file_node"), file_rank=pl.col("_file_rank"),
                             label_mode=pl.col("_label"), present=present,
                             file_nodes_everywhere=stripped.get_column("_file_node").null_count() == 0)
    return lf.drop("_file_node", "_file_rank", "_label")


def _roster(ctx: AttemptContext):
    """The attempt's nodes and rank map as placement takes them: the listed ranks, or the node-major default as such."""
    return ctx.nodes, ctx.ranks or NodeMajor(ctx.gpus_per_node)
