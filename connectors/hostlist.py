"""Slurm hostlist expressions (`gpu-[001-004,010]`, `a[1-2],b3`, `rack[1-2]-n[01-02]`) to host names.

The grammar is Slurm's: names separated by commas (or white space) outside brackets; a bracket holds comma-separated
numbers and `lo-hi` ranges, zero-padded to the width of `lo`; several bracket groups in one name multiply out, the
last group varying fastest. Order is kept as written and duplicates are dropped, as `scontrol show hostnames` does.
"""
from __future__ import annotations

import re
from itertools import product

# a range this long is a typo or an attack, not a cluster
MAX_HOSTS = 1_000_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(expression: str) -> list[str]:
    """Every host name of the expression, in order, without repeats; ValueError when it is malformed."""
    hosts: dict[str, None] = {}
    for name in _split_top_level(expression.strip()):
        for host in _expand_name(name, expression):
            hosts.setdefault(host)
            if len(hosts) > MAX_HOSTS:
                raise ValueError(f"hostlist {expression!r} names more than {MAX_HOSTS} hosts")
    return list(hosts)


def _split_top_level(expression: str) -> list[str]:
    names, current, depth = [], [], 0
    for ch in expression:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"hostlist {expression!r}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"hostlist {expression!r}: ']' without '['")
        if depth == 0 and (ch == "," or ch.isspace()):
            names.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise ValueError(f"hostlist {expression!r}: '[' without ']'")
    names.append("".join(current))
    return [n for n in names if n]


def _expand_name(name: str, expression: str) -> list[str]:
    """`rack[1-2]-n[01-02]` -> rack1-n01, rack1-n02, rack2-n01, rack2-n02."""
    parts = re.split(r"\[([^\]]*)\]", name)  # literal, bracket body, literal, ...
    choices: list[list[str]] = []
    size = 1
    for i, part in enumerate(parts):
        if i % 2 == 0:
            choices.append([part])
            continue
        numbers = _expand_bracket(part, expression)
        size *= len(numbers)
        if size > MAX_HOSTS:
            raise ValueError(f"hostlist {expression!r} names more than {MAX_HOSTS} hosts")
        choices.append(numbers)
    return ["".join(combination) for combination in product(*choices)]


def _expand_bracket(body: str, expression: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"hostlist {expression!r}: {item!r} is not a number or a lo-hi range")
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise ValueError(f"hostlist {expression!r}: range {item!r} runs backwards")
        if hi - lo + 1 > MAX_HOSTS:
            raise ValueError(f"hostlist {expression!r} names more than {MAX_HOSTS} hosts")
        width = len(lo_text)  # `01-10` pads to two digits; `1-10` does not pad
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out
