"""Declarative rule fixtures, run like `promtool test rules`: each case is a tiny attempt (context + log lines per
source and node) with the verdict fields and rule hits it must produce. All cases of a run are landed as separate
attempts and attributed in ONE rules pass, the way production runs them."""
from __future__ import annotations

import glob
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import yaml
from firstfault.connectors.static_context import context_from_dict

from firstfault import yamlio
from firstfault.config import (
    Config,
    LakeSettings,
    PatternSettings,
    RuleSettings,
    WarehouseSettings,
)
from firstfault.errors import BadInput
from firstfault.rules_sql.chains import chains_path
from firstfault.rules_sql.strengths import strengths_path
from firstfault.run import attribute, land

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
    metrics: tuple[str, ...] = ()  # CSV lines (header first) -> metrics/all.csv
    history: tuple[dict, ...] = ()  # earlier attempts of the workload -> the `history` relation (DESIGN §4.3)
    gpu_history: tuple[dict, ...] = ()  # other attempts' "application or GPU" Xids -> the `gpu_xid_history` relation

    @property
    def id(self) -> str:
        return f"{self.rule}::{self.name}"


def load_cases(folders: list[Path]) -> list[Case]:
    cases = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.yaml")):
            if path.resolve() in (chains_path().resolve(), strengths_path().resolve()):  # tables beside the rules, not fixture files
                continue
            try:
                doc = yamlio.safe_load(path.read_text(encoding="utf-8")) or {}
            except (yaml.YAMLError, UnicodeDecodeError) as e:
                raise BadInput(str(path), None, yamlio.describe_error(e)) from None
            if not isinstance(doc, dict):
                raise BadInput(str(path), None, "a fixture file is a mapping with `rule` and `cases`")
            if not isinstance(doc.get("cases") or [], list):
                raise BadInput(str(path), "cases", "must be a list")
            rule = doc.get("rule") or path.stem
            if not isinstance(rule, str):
                raise BadInput(str(path), "rule", "must be a rule id")
            for i, c in enumerate(doc.get("cases") or []):
                if not isinstance(c, dict):
                    raise BadInput(str(path), f"cases[{i}]", "must be a mapping")
                for key in ("name", "kind", "expect"):
                    if key not in c:
                        raise BadInput(str(path), f"cases[{i}].{key}", "required")
                for key, want in (("name", str), ("expect", dict), ("context", (dict, type(None))), ("logs", (dict, type(None)))):
                    if key in c and not isinstance(c[key], want):
                        raise BadInput(str(path), f"cases[{i}].{key}", "must be a " + ("string" if want is str else "mapping"))
                for key, lines in (c.get("logs") or {}).items():
                    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
                        raise BadInput(str(path), f"cases[{i}].logs.{key}", "must be a list of strings (quote lines with ': ')")
                for key in ("hits", "no_hits", "evidence"):
                    if not isinstance(c["expect"].get(key, []), list) or not all(isinstance(h, dict) for h in c["expect"].get(key, [])):
                        raise BadInput(str(path), f"cases[{i}].expect.{key}", "must be a list of mappings")
                if c["kind"] not in ("positive", "negative"):
                    raise BadInput(str(path), f"cases[{i}].kind", "must be positive or negative")
                context = {**(c.get("context") or {}), **({"flight_recorder": c["flight_recorder"]} if "flight_recorder" in c else {})}
                history = c.get("history") or []
                if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
                    raise BadInput(str(path), f"cases[{i}].history", "must be a list of mappings")
                gpu_history = c.get("gpu_history") or []
                if not isinstance(gpu_history, list) or not all(isinstance(h, dict) and {"workload_id", "node", "gpu", "ts"} <= h.keys()
                                                                for h in gpu_history):
                    raise BadInput(str(path), f"cases[{i}].gpu_history", "must be a list of mappings with workload_id, node, gpu and ts")
                if gpu_history and "cluster" not in context:  # its GPUs' history is its own, not the other cases'
                    context["cluster"] = f"{rule}.{c['name']}"
                if history and "attempt" not in context:
                    context["attempt"] = len(history)
                cases.append(Case(rule, c["name"], c["kind"], context, c.get("logs") or {}, c["expect"], path, tuple(c.get("metrics") or ()),
                                  tuple(history), tuple(gpu_history)))
    seen: dict[str, Path] = {}
    for case in cases:
        if case.id in seen:
            raise BadInput(str(case.path), "cases.name", f"duplicate case {case.id!r}, also in {seen[case.id]}")
        seen[case.id] = case.path
    return cases


def run_cases(cases: list[Case], rule_dirs: list[Path] = (), pattern_dirs: list[Path] = ()) -> dict[str, list[str]]:
    """Return case id -> list of failed expectations (empty list = pass)."""
    outcomes = attribute_cases(cases, rule_dirs, pattern_dirs)
    return {case.id: _check(case, *outcomes[case.id][:3]) for case in cases}


def attribute_cases(cases: list[Case], rule_dirs: list[Path] = (), pattern_dirs: list[Path] = ()) -> dict[str, tuple[dict, list[dict], list[dict], list[dict]]]:
    """Land and attribute the cases in one run; case id -> (its verdict row, its rule hits, its evidence rows, its
    events with the role rules gave them)."""
    with tempfile.TemporaryDirectory(prefix="firstfault-rules-") as tmp:
        config, contexts = land_cases(cases, Path(tmp), rule_dirs, pattern_dirs)
        history = [history_row(case, contexts[case.id], i, h) for case in cases for i, h in enumerate(case.history)]
        gpu_history = [gpu_history_row(contexts[case.id], h) for case in cases for h in case.gpu_history]
        result = attribute(list(contexts.values()), config, history=history, gpu_history=gpu_history)
    verdicts = {row["attempt_id"]: row for row in result.tables["attributions"].to_pylist()}
    hits = _group(result.tables["rule_hits"], "attempt_id")
    evidence = _group(result.tables["attribution_evidence"], "attempt_id")
    events = _group(result.tables["events"], "attempt_id")
    return {case.id: (verdicts[contexts[case.id].attempt_id], hits.get(contexts[case.id].attempt_id, []),
                      evidence.get(contexts[case.id].attempt_id, []), events.get(contexts[case.id].attempt_id, []))
            for case in cases}


def land_cases(cases: list[Case], root: Path, rule_dirs: list[Path] = (), pattern_dirs: list[Path] = ()) -> tuple[Config, dict]:
    """Write the cases as attempts under `root` and land them in a lake there: (the config, case id -> its context)."""
    config = Config(lake=LakeSettings(str(root / "lake")), warehouse=WarehouseSettings(str(root / "unused.duckdb")),
                    rules=RuleSettings(tuple(map(str, rule_dirs))), patterns=PatternSettings(tuple(map(str, pattern_dirs))))
    contexts = {case.id: _materialize(case, root / f"case{i}") for i, case in enumerate(cases)}
    land(list(contexts.values()), config)
    return config, contexts


def _materialize(case: Case, folder: Path):
    return context_from_dict(write_case(case, folder), str(case.path), str(folder))


def write_case(case: Case, folder: Path) -> dict:
    """Write a case's log, metrics and dump files under `folder`; return its static context (paths relative to it)."""
    folder.mkdir(parents=True)
    logs = []
    for key, lines in sorted(case.logs.items()):
        source, _, node = key.partition("/")
        relative = f"{source}/{node or 'all'}.log"
        (folder / source).mkdir(exist_ok=True)
        (folder / relative).write_text("\n".join(lines) + "\n", encoding="utf-8")
        logs.append({"source": source, "path": relative})
    doc = {**DEFAULT_CONTEXT, "workload_id": f"{case.rule}.{case.name}", **case.context, "logs": logs}
    if case.metrics:
        (folder / "metrics").mkdir(exist_ok=True)
        (folder / "metrics" / "all.csv").write_text("\n".join(case.metrics) + "\n", encoding="utf-8")
        doc["metrics"] = ["metrics/all.csv"]
    if case.context.get("flight_recorder"):
        doc["flight_recorder"] = _copy_dumps(case, folder)
    return doc


def _copy_dumps(case: Case, folder: Path) -> list[str]:
    """`flight_recorder:` globs (relative to the working directory or to the YAML file) -> copies in the case folder."""
    patterns = case.context["flight_recorder"]
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    target = folder / "flight_recorder"
    target.mkdir(exist_ok=True)
    for pattern in patterns:
        for base in (Path.cwd(), case.path.parent):
            matches = sorted(glob.glob(str(base / pattern)))
            if matches:
                break
        if not matches:
            raise BadInput(str(case.path), f"{case.name}.flight_recorder", f"no file matches {pattern!r}")
        for m in matches:
            shutil.copyfile(m, target / Path(m).name)
    return ["flight_recorder/*"]


def history_row(case: Case, ctx, i: int, h: dict) -> dict:
    """A fixture's `history:` entry (verdict, domain, subdomain, culprit_nodes, progress, attempt) as a history row."""
    attempt = int(h.get("attempt", i))
    nodes = sorted(h.get("culprit_nodes") or [])
    return {"attempt_id": f"{ctx.cluster}/{ctx.workload_id}/{attempt}", "workload_id": ctx.workload_id, "cluster": ctx.cluster,
            "attempt": attempt, "verdict": h.get("verdict", "attributed"), "domain": h.get("domain"), "subdomain": h.get("subdomain"),
            "culprit_nodes": nodes, "progress": h.get("progress"), "start_ts": None}


def gpu_history_row(ctx, h: dict) -> dict:
    """A fixture's `gpu_history:` entry (workload_id, node, gpu, ts; gpus: how many GPUs of that attempt logged one,
    default 1) as a row of the `gpu_xid_history` relation: an attempt of that workload that ended at `ts`."""
    ts = datetime.fromisoformat(str(h["ts"]).replace("Z", "+00:00")).replace(tzinfo=None)
    return {"cluster": ctx.cluster, "workload_id": h["workload_id"], "attempt_id": f"{ctx.cluster}/{h['workload_id']}/0",
            "node": h["node"], "gpu": h["gpu"], "ts": ts, "end_ts": ts, "gpus": int(h.get("gpus", 1))}


def _group(table: pa.Table, key: str) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in table.to_pylist():
        grouped.setdefault(row[key], []).append(row)
    return grouped


def _check(case: Case, verdict: dict, hits: list[dict], evidence: list[dict]) -> list[str]:
    problems = []
    for field in VERDICT_FIELDS:
        if field in case.expect and verdict[field] != case.expect[field]:
            problems.append(f"{field}: expected {case.expect[field]!r}, got {verdict[field]!r}")
    quality = verdict.get("quality") or {}
    for key, want in (case.expect.get("quality") or {}).items():
        got = quality.get(key)
        if key == "clock_skew_s":
            if got is None or abs(got - want) > 1.0:
                problems.append(f"quality.clock_skew_s: expected about {want!r}, got {got!r}")
        elif key == "reasons":  # substrings, each must appear in some reason
            for part in want:
                if not any(part in r for r in got or []):
                    problems.append(f"quality.reasons: no reason mentions {part!r} in {got!r}")
        elif got != want:
            problems.append(f"quality.{key}: expected {want!r}, got {got!r}")
    if "why_not" in case.expect:  # null, or the fields it must have (the others are not compared)
        want, got = case.expect["why_not"], verdict.get("why_not")
        if want is None or got is None:
            if want != got:
                problems.append(f"why_not: expected {want!r}, got {got!r}")
        else:
            problems += [f"why_not.{k}: expected {v!r}, got {got.get(k)!r} in {got!r}" for k, v in want.items() if got.get(k) != v]
    for want in case.expect.get("hits", []):
        if not any(all(h.get(k) == v for k, v in want.items()) for h in hits):
            problems.append(f"missing rule hit {want}")
    for unwanted in case.expect.get("no_hits", []):
        if any(all(h.get(k) == v for k, v in unwanted.items()) for h in hits):
            problems.append(f"unexpected rule hit {unwanted}")
    for want in case.expect.get("evidence", []):
        if not any(all(e.get(k) == v for k, v in want.items()) for e in evidence):
            problems.append(f"missing evidence row {want}")
    return problems
