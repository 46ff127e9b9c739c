"""Declarative rule fixtures, run like `promtool test rules`: each case is a tiny attempt (context + log lines per
source and node) with the verdict fields and rule hits it must produce. All cases of a run are landed as separate
attempts and attributed in ONE rules pass, the way production runs them."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import context_from_dict
from firstfault.errors import BadInput
from firstfault.pipeline import attribute, land

DEFAULT_CONTEXT = {
    "cluster": "rules", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z", "state": "FAILED",
    "nodes": ["node-01", "node-02"], "gpus_per_node": 8,
}
VERDICT_FIELDS = ("verdict", "domain", "subdomain", "culprit_nodes", "culprit_ranks", "granularity", "action")


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    kind: str  # positive | negative
    context: dict
    logs: dict[str, list[str]]  # "source" or "source/node" -> lines
    expect: dict
    path: Path

    @property
    def id(self) -> str:
        return f"{self.rule}::{self.name}"


def load_cases(folders: list[Path]) -> list[Case]:
    cases = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.yaml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            rule = doc.get("rule") or path.stem
            for i, c in enumerate(doc.get("cases") or []):
                for key in ("name", "kind", "expect"):
                    if key not in c:
                        raise BadInput(str(path), f"cases[{i}].{key}", "required")
                if c["kind"] not in ("positive", "negative"):
                    raise BadInput(str(path), f"cases[{i}].kind", "must be positive or negative")
                cases.append(Case(rule, c["name"], c["kind"], c.get("context") or {}, c.get("logs") or {}, c["expect"], path))
    return cases


def run_cases(cases: list[Case], rule_dirs: list[Path] = (), pattern_dirs: list[Path] = ()) -> dict[str, list[str]]:
    """Return case id -> list of failed expectations (empty list = pass)."""
    with tempfile.TemporaryDirectory(prefix="firstfault-rules-") as tmp:
        root = Path(tmp)
        config = Config(lake=LakeSettings(str(root / "lake")), warehouse=WarehouseSettings(str(root / "unused.duckdb")))
        contexts = {case.id: _materialize(case, root / f"case{i}") for i, case in enumerate(cases)}
        land(list(contexts.values()), config, pattern_dirs)
        result = attribute(list(contexts.values()), config, rule_dirs)
    verdicts = {row["attempt_id"]: row for row in result.tables["attributions"].to_pylist()}
    hits = _group(result.tables["rule_hits"], "attempt_id")
    return {case.id: _check(case, verdicts[contexts[case.id].attempt_id], hits.get(contexts[case.id].attempt_id, [])) for case in cases}


def _materialize(case: Case, folder: Path):
    folder.mkdir(parents=True)
    logs = []
    for key, lines in sorted(case.logs.items()):
        source, _, node = key.partition("/")
        relative = f"{source}/{node or 'all'}.log"
        (folder / source).mkdir(exist_ok=True)
        (folder / relative).write_text("\n".join(lines) + "\n", encoding="utf-8")
        logs.append({"source": source, "path": relative})
    doc = {**DEFAULT_CONTEXT, "workload_id": f"{case.rule}.{case.name}", **case.context, "logs": logs}
    return context_from_dict(doc, str(case.path), str(folder))


def _group(table: pa.Table, key: str) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in table.to_pylist():
        grouped.setdefault(row[key], []).append(row)
    return grouped


def _check(case: Case, verdict: dict, hits: list[dict]) -> list[str]:
    problems = []
    for field in VERDICT_FIELDS:
        if field in case.expect and verdict[field] != case.expect[field]:
            problems.append(f"{field}: expected {case.expect[field]!r}, got {verdict[field]!r}")
    for want in case.expect.get("hits", []):
        if not any(all(h.get(k) == v for k, v in want.items()) for h in hits):
            problems.append(f"missing rule hit {want}")
    for unwanted in case.expect.get("no_hits", []):
        if any(all(h.get(k) == v for k, v in unwanted.items()) for h in hits):
            problems.append(f"unexpected rule hit {unwanted}")
    return problems
