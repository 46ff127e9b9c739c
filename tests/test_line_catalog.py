"""The line catalog: a sample line of every known shape (tests/catalog/*.yaml), run through the production path
(decorations, timestamps, placement, extraction), yields exactly the expected events.

Case format (one YAML list per family file)::

    - ref: "§1.3 Xid 13 burst — leptonai/gpud#46"     # where the line comes from
      source: syslog                                   # optional, default applog
      node: gpu-001                                    # optional
      lines: ["…", "…"]                                # fed together, in order
      expect: [{kind: xid, code: 13, gpu: "0000:cb:00", fields: {name: "<unknown>"}}]

``expect`` lists the events in output order (line order, then pattern order); the number of events must match
exactly (``expect: []`` = the lines yield no event). Each expected event is a subset match: only the keys given are
compared, ``null`` means the column is null, and ``fields`` is compared key by key inside the JSON (values as
strings, ``null`` = key absent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from firstfault.landing import events_from_lines
from firstfault.rules_sql.catalogue import diff_event
from firstfault.schema import EVENT_SCHEMA

CATALOG_DIR = Path(__file__).parent / "catalog"
CASE_KEYS = {"ref", "source", "node", "lines", "expect"}


def _load_cases() -> list[Any]:
    params = []
    for path in sorted(CATALOG_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        for i, case in enumerate(data):
            params.append(pytest.param(path.name, i, case, id=f"{path.stem}-{i:03d}"))
    return params


CASES = _load_cases()


def _check_case_shape(case: Any, where: str) -> None:
    assert isinstance(case, dict), f"{where}: a case is a mapping"
    unknown = set(case) - CASE_KEYS
    assert not unknown, f"{where}: unknown keys {sorted(unknown)}"
    assert isinstance(case.get("ref"), str) and case["ref"], f"{where}: 'ref' is required"
    lines = case.get("lines")
    assert isinstance(lines, list) and lines and all(isinstance(x, str) for x in lines), (
        f"{where}: 'lines' must be a non-empty list of strings"
    )
    expect = case.get("expect")
    assert isinstance(expect, list) and all(isinstance(e, dict) for e in expect), (
        f"{where}: 'expect' must be a list of mappings"
    )
    for e in expect:
        bad = {k for k in e if k not in EVENT_SCHEMA}
        assert not bad, f"{where}: expected keys not in the event schema: {sorted(bad)}"


def test_catalog_is_not_empty():
    assert CASES, f"no cases found in {CATALOG_DIR}"


@pytest.mark.parametrize(("file", "index", "case"), CASES)
def test_line_catalog(file: str, index: int, case: Any) -> None:
    where = f"{file}[{index}]"
    _check_case_shape(case, where)
    ev = events_from_lines(case["lines"], case.get("source", "applog"), node=case.get("node"))
    assert ev.schema == pl.Schema(EVENT_SCHEMA), f"{where}: output schema differs from EVENT_SCHEMA"
    rows = ev.to_dicts()
    summary = "\n".join(
        f"  {r['kind']} code={r['code']} code_text={r['code_text']} gpu={r['gpu']} fields={r['fields']}" for r in rows
    )
    expect = case["expect"]
    assert len(rows) == len(expect), (
        f"{where} ({case['ref']}): {len(rows)} events, expected {len(expect)}:\n{summary}"
    )
    for n, (got, want) in enumerate(zip(rows, expect)):
        problems = diff_event(got, want)
        assert not problems, f"{where} ({case['ref']}) event {n}: " + "; ".join(problems) + f"\n{summary}"
