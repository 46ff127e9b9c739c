"""Resolve the peer address of NET/IB and socket errors to a node of the attempt."""
from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from firstfault.transforms.placement import host_aliases, resolve_host

# NCCL INFO lines that tell which address belongs to which host
_ADDRESS_FIELDS = {"nccl_net_using": "oob_ip", "nccl_bootstrap": "ip"}


def normalize_address(expr: pl.Expr) -> pl.Expr:
    """`fe80::1%ib0` -> `fe80::1`, `::ffff:10.0.0.2` -> `10.0.0.2`, host names lower-cased."""
    return expr.str.to_lowercase().str.replace(r"%.*$", "").str.replace(r"^::ffff:", "").str.strip_chars("[] ")


def address_book(events: pl.LazyFrame, known: Sequence[tuple[str, str]]) -> pl.LazyFrame:
    """(address, node) pairs from the static context and from NCCL INFO lines of the attempt."""
    learned = [
        events.filter(pl.col("kind") == kind).select(
            address=pl.col("fields").str.json_path_match(f"$.{field}"), node=pl.col("node")
        )
        for kind, field in _ADDRESS_FIELDS.items()
    ]
    given = pl.LazyFrame({"address": [a for a, _ in known], "node": [n for _, n in known]}, schema={"address": pl.String, "node": pl.String})
    return (
        pl.concat([given, *learned])
        .drop_nulls()
        .with_columns(address=normalize_address(pl.col("address")))
        .unique(subset="address", keep="first", maintain_order=True)
    )


def resolve_peers(events: pl.LazyFrame, nodes: Sequence[str], known: Sequence[tuple[str, str]]) -> pl.LazyFrame:
    # the address book is small: a lookup, not a join, keeps the events in their order without a re-sort
    book = address_book(events, known).collect()
    by_address = normalize_address(pl.col("peer_addr")).replace_strict(
        dict(zip(book["address"], book["node"])), default=None, return_dtype=pl.String
    )
    by_name = resolve_host(pl.col("peer_addr"), host_aliases(nodes))
    in_nodes = by_name.is_in(list(nodes))
    return events.with_columns(peer_node=pl.coalesce(pl.col("peer_node"), by_address, pl.when(in_nodes).then(by_name)))
