"""Slurm range lists: task lists (``2,4-5,7``) and host lists (``gpu-[001-004,010],login1``)."""

from __future__ import annotations

import itertools
import re

__all__ = ["expand_task_list", "expand_hostlist"]

_RANGE_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def _expand_ranges(spec: str) -> list[str]:
    """``"001-003,010"`` -> ``["001", "002", "003", "010"]`` (zero padding kept from the lower bound)."""
    out: list[str] = []
    for part in spec.split(","):
        if not part.strip():
            continue
        m = _RANGE_RE.match(part)
        if not m:
            raise ValueError(f"not a Slurm range: {part!r}")
        lo_s, hi_s = m.group(1), m.group(2)
        if hi_s is None:
            out.append(lo_s)
            continue
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"descending Slurm range: {part!r}")
        width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def expand_task_list(spec: str) -> list[int]:
    """``"0-57,59-63"`` -> ``[0, 1, …, 57, 59, …, 63]``; ``"2,4-5,7"`` -> ``[2, 4, 5, 7]``.

    Surrounding brackets (``[0-3]``) and blanks are tolerated; the order and duplicates are kept as printed.
    Raises ValueError for text that is not a range list.
    """
    s = spec.strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    return [int(x) for x in _expand_ranges(s)]


def _split_top(spec: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced brackets in host list: {spec!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced brackets in host list: {spec!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


_BRACKET_RE = re.compile(r"\[([^\[\]]*)\]")


def expand_hostlist(spec: str) -> list[str]:
    """``"gpu-[001-004,010]"`` -> ``["gpu-001", …, "gpu-004", "gpu-010"]``.

    Supports several comma-separated entries (``"a1,b[1-2]"``) and several bracket groups in one name
    (``"rack[1-2]-n[01-02]"`` -> cartesian product, first group outermost), as ``scontrol show hostnames`` does.
    """
    out: list[str] = []
    for entry in _split_top(spec):
        pieces = _BRACKET_RE.split(entry)  # literal, range, literal, range, …, literal
        literals, ranges = pieces[0::2], pieces[1::2]
        if any("[" in lit or "]" in lit for lit in literals):
            raise ValueError(f"malformed host list entry: {entry!r}")
        expanded = [_expand_ranges(r) for r in ranges]
        for combo in itertools.product(*expanded):
            name = literals[0]
            for value, lit in zip(combo, literals[1:]):
                name += value + lit
            out.append(name)
    return out
