"""The message catalogue checked through the production path: every example lands as its own small attempt (three
nodes, the line on node-02 in the log of its source, state FAILED) and all of them are attributed in ONE run. An
entry is handled when each of its examples yields its event kind (and `expect` columns) and plays its role: a root
is the verdict (its class, on node-02 or on the peer node the line names; a job-scoped root names no node), any
other role is never a root."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
from firstfault.landing import events_from_lines
from firstfault.rules_sql.cases import Case, attribute_cases
from firstfault.transforms.messages import Example, Message

NODES = ("node-01", "node-02", "node-03")
LINE_NODE = "node-02"
_CONTEXT = {"nodes": list(NODES), "state": "FAILED"}
_BEFORE, _AFTER = timedelta(minutes=5), timedelta(minutes=55)  # the line falls early in its attempt


@dataclass(frozen=True)
class EntryResult:
    message: Message
    problems: tuple[str, ...]  # empty = handled

    @property
    def handled(self) -> bool:
        return not self.problems


COVERAGE_COLUMNS = ["emitter", "id", "kind", "role", "class", "entries", "handled", "problem"]


def check_catalogue(messages: list[Message], rule_dirs: list[Path] = (), pattern_dirs: list[Path] = ()) -> list[EntryResult]:
    """Attribute every example of `messages` in one run (with the site rules and patterns of those folders, after the
    built-in ones); one result per entry, in catalogue order."""
    examples = [(m, n, x) for m in messages for n, x in enumerate(m.examples)]
    cases = {(m.id, n): _case(m, n, x, window) for (m, n, x), window in zip(examples, example_windows(examples))}
    outcomes = attribute_cases(list(cases.values()), rule_dirs, pattern_dirs)
    results = []
    for m in messages:
        problems = []
        for n, x in enumerate(m.examples):
            verdict, _, _, events = outcomes[cases[(m.id, n)].id]
            problems += [f"example {n}: {p}" for p in check_example(m, x, verdict, events)]
        results.append(EntryResult(m, tuple(problems)))
    return results


def coverage_rows(results: list[EntryResult]) -> list[tuple]:
    """`firstfault rules coverage`: one row per entry (entries 1, handled 1 or 0, its first problem), then per
    emitter a total row (id `*`), then the catalogue's (emitter and id `*`); emitters sorted, entries in file order."""
    by_emitter: dict[str, list[EntryResult]] = {}
    for r in results:
        by_emitter.setdefault(r.message.emitter, []).append(r)
    rows = []
    for emitter in sorted(by_emitter):
        group = by_emitter[emitter]
        rows += [(emitter, r.message.id, r.message.kind, r.message.role, r.message.cls, 1, int(r.handled),
                  r.problems[0] if r.problems else None) for r in group]
        rows.append((emitter, "*", None, None, None, len(group), sum(r.handled for r in group), None))
    rows.append(("*", "*", None, None, None, len(results), sum(r.handled for r in results), None))
    return rows


def _case(m: Message, n: int, x: Example, window: dict) -> Case:
    return Case("catalogue", f"{m.id}.{n}", "positive", {**_CONTEXT, **window},
                {f"{m.source}/{LINE_NODE}": list(x.lines)}, {}, Path(m.file))


def example_windows(examples: list[tuple[Message, int, Example]]) -> list[dict]:
    """Per example, an attempt window around the line's own stamp (a real line keeps its date) so the rules read its
    events, or {} for the default window; the stamps come from one extraction per source over every example's lines."""
    windows: list[dict] = [{} for _ in examples]
    for source in sorted({m.source for m, _, _ in examples}):
        picked = [i for i, (m, _, _) in enumerate(examples) if m.source == source]
        lines = [line for i in picked for line in examples[i][2].lines]
        owner = pl.DataFrame({"line": range(1, len(lines) + 1),
                              "example": [i for i in picked for _ in examples[i][2].lines]})
        stamps = (events_from_lines(lines, source, node=LINE_NODE).join(owner, on="line").drop_nulls("ts")
                  .group_by("example").agg(lo=pl.col("ts").min(), hi=pl.col("ts").max()))
        for i, lo, hi in stamps.iter_rows():
            windows[i] = {"start": (lo - _BEFORE).isoformat() + "Z", "end": (hi + _AFTER).isoformat() + "Z"}
    return windows


def check_example(m: Message, x: Example, verdict: dict, events: list[dict]) -> list[str]:
    """What is wrong with one example's outcome: its events (with their roles) and its attempt's verdict."""
    events = sorted(events, key=lambda e: (e["line"] or 0, e["event_id"]))
    summary = ", ".join(f"{e['kind']}({e['role'] or '-'})" for e in events) or "no event"
    if m.kind is None:
        return [] if not events else [f"expected no event, got {summary}"]
    mine = [e for e in events if e["kind"] == m.kind]
    if not mine:
        return [f"expected a {m.kind} event, got {summary}"]
    problems = diff_event(mine[0], x.expect)
    if m.role == "root":
        got = f"{verdict['verdict']} {verdict['domain']}/{verdict['subdomain']} on {verdict['culprit_nodes']}"
        if f"{verdict['domain']}/{verdict['subdomain']}" != m.cls:
            problems.append(f"root: expected the verdict {m.cls}, got {got} ({summary})")
        elif m.scope != "job" and expected_culprit(m, x) not in (verdict["culprit_nodes"] or []):
            problems.append(f"root: expected the culprit {expected_culprit(m, x)}, got {got}")
    else:
        roots = [e["kind"] for e in events if e["role"] == "root"]
        if roots:
            problems.append(f"{m.role}: the line's events are a root ({summary})")
    return problems


def expected_culprit(m: Message, x: Example) -> str:
    """node-02, where the line is written; for a peer-scoped message, the attempt's node the line names, if any."""
    if m.scope == "peer":
        named = [n for n in NODES if any(re.search(rf"\b{re.escape(n)}\b", line) for line in x.lines)]
        if len(named) == 1:
            return named[0]
    return LINE_NODE


def diff_event(got: dict, want: dict[str, Any]) -> list[str]:
    """Subset match of one event against `want`: only the keys given, `null` = null, `fields` key by key (values
    compared as strings, `null` = key absent)."""
    problems = []
    for key, exp in want.items():
        if key == "fields":
            have = json.loads(got["fields"]) if got.get("fields") else {}
            for fk, fv in exp.items():
                fv = None if fv is None else str(fv)
                if have.get(fk) != fv:
                    problems.append(f"fields.{fk}: got {have.get(fk)!r}, want {fv!r}")
            continue
        value = got.get(key)
        value = str(value) if value is not None and not isinstance(value, (int, float, str, bool)) else value
        if value != exp:
            problems.append(f"{key}: got {value!r}, want {exp!r}")
    return problems
