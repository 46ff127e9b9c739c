"""Which rules a rule pass plans: a rule whose `inputs:` header names only event kinds (`events(kind in a, b)` or
`events(kind = a)`) cannot hit when none of those kinds is among the run's events, so it is left out of the UNION
(planning the UNION of every rule is most of a small attempt's rule pass). Any other header — other tables
(`attempts`, `progress`, reference tables), qualifiers beside the kinds, a header continued on the next line, or none
— keeps the rule in every pass."""
from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar

_KINDS_ONLY = re.compile(r"events\(kind (?:in (?P<kinds>[a-z0-9_]+(?:, [a-z0-9_]+)*)|= (?P<kind>[a-z0-9_]+))\)")


class HasHeader(Protocol):
    header: dict[str, str]


R = TypeVar("R", bound=HasHeader)

def event_kinds_read(header: dict[str, str]) -> frozenset[str] | None:
    """The event kinds a rule reads when its `inputs:` header lists nothing else; None when the rule must always run."""
    match = _KINDS_ONLY.fullmatch(str(header.get("inputs", "")).strip())
    if match is None:
        return None
    return frozenset((match["kinds"] or match["kind"]).split(", "))


def needed_rules(rules: Sequence[R], kinds_present: Collection[str]) -> list[R]:
    """`rules` less those whose header names only kinds absent from `kinds_present`, in their order."""
    present = set(kinds_present)
    return [r for r in rules if (kinds := event_kinds_read(r.header)) is None or kinds & present]
