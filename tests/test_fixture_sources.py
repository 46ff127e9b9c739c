"""Fixture cases built from real log lines say where every line comes from.

Such a case (in rules_sql/*.yaml or tests/corpus/*.yaml) carries

    sources:
      - url: https://github.com/<owner>/<repo>/issues/<n>     # the public page the lines were copied from
        lines:                                             # the lines exactly as printed there
          - "[ 7063.247407] Memory cgroup out of memory: Killed process 63214 (uwsgi) …"

and every line of its `logs` is one of those lines, verbatim, optionally after a syslog prefix that places it on a
node and in time (`Nov 29 01:40:03 node-02 kernel: `). The test fails when a source lacks its URL or its lines, when
a listed line is not in the logs, or when a log line is not among the listed ones. Every case of the corpus and of
the rules named in REAL_LINE_RULES has sources, and those rules keep a multi-node positive and a negative built so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_FILES = sorted((ROOT / "rules_sql").glob("*.yaml")) + sorted((ROOT / "tests" / "corpus").glob("*.yaml"))
#: rules whose fixtures include cases built from real lines (issue 14's classes): each keeps a multi-node positive and
#: a near-miss negative that list their sources
REAL_LINE_RULES = (
    "cuda_error", "filesystem_error", "gpu_fallen_off_bus", "host_oom", "ib_link_kernel", "kernel_fault", "nan_loss",
    "kubernetes_disruption", "node_vanished", "pcie_aer", "python_exception", "roce_gid", "segfault", "slurm_messages",
    "xid_root", "_rank",
)
#: fixture files where every case is built from real lines
ALL_SOURCED = {"filesystem_error.yaml", "kernel_fault.yaml", "nan_loss.yaml", "node_vanished.yaml"}


def _cases(path: Path) -> list[dict]:
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("cases") or []


def _problems(case: dict) -> list[str]:
    sources = case.get("sources")
    if not isinstance(sources, list) or not sources:
        return ["no `sources` list"]
    problems, listed = [], []
    for i, src in enumerate(sources):
        url = src.get("url") if isinstance(src, dict) else None
        lines = src.get("lines") if isinstance(src, dict) else None
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            problems.append(f"sources[{i}]: no `url`")
        if not isinstance(lines, list) or not lines or not all(isinstance(x, str) and x.strip() for x in lines):
            problems.append(f"sources[{i}]: no verbatim `lines`")
            continue
        listed += lines
    logged = [line for lines in (case.get("logs") or {}).values() for line in lines]
    problems += [f"listed line not in the logs: {x!r}" for x in listed if not any(x in line for line in logged)]
    problems += [f"log line without a source: {line!r}" for line in logged if not any(x in line for x in listed)]
    return problems


SOURCED = [
    pytest.param(c, id=f"{p.parent.name}/{p.stem}::{c.get('name')}")
    for p in FIXTURE_FILES for c in _cases(p) if "sources" in c or p.name in ALL_SOURCED or p.parent.name == "corpus"
]


@pytest.mark.parametrize("case", SOURCED)
def test_sourced_case_names_the_url_and_the_verbatim_lines(case):
    problems = _problems(case)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rule", REAL_LINE_RULES)
def test_rule_keeps_a_sourced_multi_node_positive_and_negative(rule):
    sourced = [c for c in _cases(ROOT / "rules_sql" / f"{rule}.yaml") if "sources" in c and not _problems(c)]
    # the nodes that logged, and the culprit (a vanished node logs nothing)
    nodes = lambda c: ({key.partition("/")[2] for key in c.get("logs") or {}} | set(c["expect"].get("culprit_nodes") or [])) - {""}  # noqa: E731
    assert any(c["kind"] == "positive" and len(nodes(c)) >= 2 for c in sourced), f"{rule}: no sourced multi-node positive"
    assert any(c["kind"] == "negative" for c in sourced), f"{rule}: no sourced negative"


def test_a_case_without_its_url_or_line_fails():
    good = {"logs": {"syslog/node-02": ["Nov 29 01:40:03 node-02 kernel: [ 1.0] x"]},
            "sources": [{"url": "https://example.org/a", "lines": ["[ 1.0] x"]}]}
    assert _problems(good) == []
    assert _problems({**good, "sources": [{"lines": ["[ 1.0] x"]}]}) == ["sources[0]: no `url`"]
    assert _problems({**good, "sources": [{"url": "https://example.org/a"}]})[0] == "sources[0]: no verbatim `lines`"
    assert _problems({**good, "sources": [{"url": "https://example.org/a", "lines": ["[ 1.0] y"]}]})
    assert _problems({k: v for k, v in good.items() if k != "sources"}) == ["no `sources` list"]
