"""Which rules a rule pass plans: a rule cannot hit when none of the event kinds its rows come from is among the
run's events, so it is left out of the UNION (planning the UNION of every rule is most of a small attempt's rule pass).
Those kinds are the header's `needs:` (`needs: xid, gsp_heartbeat`: whatever else the rule reads, each of its rows
comes from an event of one of these kinds), else an `inputs:` header that names nothing but event kinds
(`events(kind in a, b)` or `events(kind = a)`). A rule with neither runs in every pass."""
from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar

_KIND_LIST = r"[a-z0-9_]+(?:, [a-z0-9_]+)*"
_KINDS_ONLY = re.compile(rf"events\(kind (?:in (?P<kinds>{_KIND_LIST})|= (?P<kind>[a-z0-9_]+))\)")
NEEDS = re.compile(_KIND_LIST)


class HasHeader(Protocol):
    header: dict[str, str]


R = TypeVar("R", bound=HasHeader)


def event_kinds_read(header: dict[str, str]) -> frozenset[str] | None:
    """The event kinds a rule's rows come from, from its header; None when the rule must always run."""
    if "needs" in header:
        return frozenset(str(header["needs"]).strip().split(", "))
    match = _KINDS_ONLY.fullmatch(str(header.get("inputs", "")).strip())
    if match is None:
        return None
    return frozenset((match["kinds"] or match["kind"]).split(", "))


def needed_rules(rules: Sequence[R], kinds_present: Collection[str]) -> list[R]:
    """`rules` less those whose header names only kinds absent from `kinds_present`, in their order."""
    present = set(kinds_present)
    return [r for r in rules if (kinds := event_kinds_read(r.header)) is None or kinds & present]
