"""Resolve the peer address of NET/IB and socket errors to a node of the attempt."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from firstfault.transforms.placement import host_aliases, resolve_host

# NCCL INFO lines that tell which address belongs to which host
_ADDRESS_FIELDS = {"nccl_net_using": "oob_ip", "nccl_bootstrap": "ip"}


def normalize_address(expr: pl.Expr) -> pl.Expr:
    """`fe80::1%ib0` -> `fe80::1`, `::ffff:10.0.0.2` -> `10.0.0.2`, host names lower-cased."""
    return expr.str.to_lowercase().str.replace(r"%.*$", "").str.replace(r"^::ffff:", "").str.strip_chars("[] ")


def resolve_peers(events: pl.DataFrame, nodes: Sequence[str], known: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """`peer_node` of the events of one attempt (see `resolve_attempt_peers`)."""
    return resolve_attempt_peers(events, {"": (nodes, known)}, pl.lit(""))


def resolve_attempt_peers(events: pl.DataFrame, attempts: Mapping[str, tuple[Sequence[str], Sequence[tuple[str, str]]]],
                          attempt: pl.Expr = pl.col("attempt_id")) -> pl.DataFrame:
    """Fill `peer_node` from `peer_addr`: an address of the attempt's address book (the static context's, then
    what its NCCL INFO lines tell), else a host name of one of its nodes. `attempts` maps each attempt (the value of
    `attempt`) to its (nodes, known addresses), so the events of many attempts are resolved in one pass. The events
    come collected: the address books are read from them first."""
    events = events.lazy()
    key = attempt.fill_null("") + "\x00"
    learned = [
        events.filter(pl.col("kind") == kind).select(
            key=key, address=pl.col("fields").str.json_path_match(f"$.{field}"), node=pl.col("node")
        )
        for kind, field in _ADDRESS_FIELDS.items()
    ]
    given = pl.LazyFrame(
        [(f"{a}\x00", address, node) for a, (_, known) in attempts.items() for address, node in known],
        schema={"key": pl.String, "address": pl.String, "node": pl.String}, orient="row",
    )
    # the address books are small: a lookup, not a join, keeps the events in their order without a re-sort
    book = (
        pl.concat([given, *learned]).drop_nulls().with_columns(address=normalize_address(pl.col("address")))
        .unique(subset=["key", "address"], keep="first", maintain_order=True)
        .select(pl.col("key") + pl.col("address"), "node").collect()
    )
    aliases, members = {}, set()
    for a, (nodes, _) in attempts.items():
        for alias, node in host_aliases(nodes).items():
            aliases[f"{a}\x00{alias}"] = node
        members.update(f"{a}\x00{n}" for n in nodes)
    peer = pl.col("peer_addr")
    by_address = (key + normalize_address(peer)).replace_strict(dict(zip(book["key"], book["node"])), default=None,
                                                                 return_dtype=pl.String)
    by_name = resolve_host(peer, aliases, key)
    in_nodes = (key + by_name).is_in(list(members))
    return events.with_columns(peer_node=pl.coalesce(pl.col("peer_node"), by_address, pl.when(in_nodes).then(by_name))).collect()
