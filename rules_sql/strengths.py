"""The strengths table (`rules_sql/strengths.yaml`, docs/DESIGN.md §4.2): how much each kind of evidence proves, on one
scale of named tiers, as data. A SQL rule gives a strength as `strength('<key>')`, which the loader replaces by the
key's value; Python rules call the DuckDB macro of the same name or `strength()` here. A key no row defines is a
load-time error naming the rule file and line."""
from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

from firstfault import yamlio
from firstfault.errors import BadInput
from firstfault.rules_sql.chains import check_row

STRENGTHS_FILE = "strengths.yaml"
ROW_KEYS = {"key", "strength", "tier", "why", "source"}
TIER_KEYS = {"name", "from", "to", "means"}
# a rule's use of the macro: strength('key') in SQL, or the same text in a Python rule's source
USE = re.compile(r"\bstrength\(\s*'([^']*)'\s*\)")


def strengths_path() -> Path:
    return Path(str(resources.files("firstfault.rules_sql") / STRENGTHS_FILE))


def load_strengths(path: Path | None = None) -> dict[str, dict]:
    """key -> row of a strengths file, checked: every row in a declared tier and inside its range; BadInput names the
    row and field."""
    path = path or strengths_path()
    doc = yamlio.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("tiers"), list) or not isinstance(doc.get("strengths"), list):
        raise BadInput(str(path), None, "a strengths file is a mapping with `tiers` and `strengths` lists")
    tiers = {}
    for i, raw in enumerate(doc["tiers"]):
        if not isinstance(raw, dict) or set(raw) != TIER_KEYS or not _number(raw["from"]) or not _number(raw["to"]):
            raise BadInput(str(path), f"tiers[{i}]", "needs `name`, `from`, `to` (numbers) and `means`")
        tiers[raw["name"]] = (float(raw["from"]), float(raw["to"]))
    rows = {}
    for i, raw in enumerate(doc["strengths"]):
        where = f"strengths[{i}]"
        check_row(path, where, raw, ROW_KEYS, ("key", "tier", "why"))
        if raw["key"] in rows:
            raise BadInput(str(path), f"{where}.key", f"duplicate key {raw['key']!r}")
        if "source" in raw and not str(raw["source"]).startswith("https://"):
            raise BadInput(str(path), f"{where}.source", "must be an https:// URL")
        if raw["tier"] not in tiers:
            raise BadInput(str(path), f"{where}.tier", f"must be one of {', '.join(tiers)}")
        low, high = tiers[raw["tier"]]
        if not _number(raw.get("strength")) or not low <= raw["strength"] <= high:
            raise BadInput(str(path), f"{where}.strength", f"must be a number within tier {raw['tier']} ({low:g} to {high:g})")
        rows[raw["key"]] = {"key": raw["key"], "strength": float(raw["strength"]), "tier": raw["tier"],
                            "why": raw["why"].strip(), "source": raw.get("source")}
    return rows


@cache
def shipped_strengths() -> dict[str, dict]:
    return load_strengths()


def strength(key: str) -> float:
    """A key's strength, for Python code that builds hits (KeyError for an unknown key, as the load-time check
    reports for rules)."""
    return shipped_strengths()[key]["strength"]


def check_strength_keys(path: Path, text: str) -> None:
    """BadInput naming the file and line of the first `strength('<key>')` whose key the table lacks."""
    inline_strengths(path, text)


def inline_strengths(path: Path, text: str) -> str:
    """`text` with each `strength('<key>')` replaced by the key's value, the way a SQL rule or script is loaded: the
    value is read from the table once, and the statement DuckDB plans holds a plain number (the macro, expanded at
    every use, would cost the rule pass about 2 ms of binding per use). BadInput names the file and line of a key the
    table lacks."""
    known = shipped_strengths()
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        for key in USE.findall(line):
            if key not in known:
                raise BadInput(str(path), f"line {number}", f"unknown strength key {key!r} (rules_sql/{STRENGTHS_FILE})")
        lines[number - 1] = USE.sub(lambda m: repr(known[m.group(1)]["strength"]), line)
    return "".join(lines)


def register_strengths(con: duckdb.DuckDBPyConnection) -> None:
    """The table `strengths` and the macro `strength(key)` over it, for Python rules and ad-hoc queries (SQL rules have
    their keys inlined when they are loaded: `inline_strengths`)."""
    rows = list(shipped_strengths().values())
    table = pa.Table.from_pylist(rows, pa.schema([("key", pa.string()), ("strength", pa.float64()), ("tier", pa.string()),
                                                  ("why", pa.string()), ("source", pa.string())]))
    con.register("_strengths", table)
    con.execute("CREATE OR REPLACE TEMP TABLE strengths AS SELECT * FROM _strengths")
    con.unregister("_strengths")
    con.execute("CREATE OR REPLACE TEMP MACRO strength(evidence) AS (SELECT s.strength FROM strengths s WHERE s.key = evidence)")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
