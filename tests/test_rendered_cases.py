"""The rendered multi-node cases (tests/rendered/*.yaml, rules_sql/rendered_cases.py): the folder is exactly what the
catalogue renders (regenerate it after a catalogue change), it scores 100 % with no confident-wrong verdict beside the
real-line corpus, and the two folders together cover every family (catalogue file) of the catalogue (the rendered
cases by the entries they are built from, the corpus by the catalogue's real lines it quotes) and every causal chain
(a chain covered: it made one of an attempt's root hits a symptom of its cause, or a near miss its cause recovered; a
rendered chain case names its chain in `chains:`)."""
from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from firstfault.cli import main
from firstfault.rules_sql.cases import attribute_cases, load_cases
from firstfault.rules_sql.chains import load_chains
from firstfault.rules_sql.rendered_cases import SYSLOG_PREFIX, write_rendered_cases
from firstfault.transforms.messages import load_catalogue

TESTS = Path(__file__).parent
RENDERED_DIR, CORPUS_DIR = TESTS / "rendered", TESTS / "corpus"
MESSAGES = load_catalogue()


def test_the_folder_is_what_the_catalogue_renders(tmp_path):
    written = write_rendered_cases(tmp_path, MESSAGES)
    assert sorted(p.name for p in RENDERED_DIR.glob("*.yaml")) == sorted(p.name for p in written)
    for path in written:
        assert (RENDERED_DIR / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), \
            f"tests/rendered/{path.name} is stale: python -m firstfault.rules_sql.rendered_cases tests/rendered"


def test_rendered_cases_score_100_percent_with_no_confident_wrong():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["-q", "evaluate", "--corpus", str(RENDERED_DIR), "--json"]) == 0
    result = json.loads(out.getvalue())
    assert result["confident_wrong"] == 0, result["confident_wrong_attempts"]
    assert result["scored"] == len(load_cases([RENDERED_DIR])) and result["accuracy"] == 1.0, result["misses"]


def families_covered(folder: Path) -> set[str]:
    """The catalogue files whose example lines appear in the folder's attempts (a corpus line may carry a syslog
    prefix before the quoted line)."""
    lines = [line for case in load_cases([folder]) for log in case.logs.values() for line in log]
    return {m.file for m in MESSAGES if any(q in line for x in m.examples for q in x.lines for line in lines)}


@pytest.fixture(scope="module")
def coverage():
    return {"rendered": families_covered(RENDERED_DIR), "corpus": families_covered(CORPUS_DIR)}


def test_corpus_and_rendered_cases_cover_every_family(coverage):
    every = {m.file for m in MESSAGES}
    assert every <= coverage["rendered"] | coverage["corpus"], sorted(every - coverage["rendered"] - coverage["corpus"])


def test_every_rendered_line_is_a_rendered_catalogue_example():
    rendered = {q for m in MESSAGES for x in m.examples if x.url is None for q in x.lines}
    syslog_stamp = re.compile("^" + re.escape(SYSLOG_PREFIX).replace(re.escape("{time}"), r"\d\d:\d\d:\d\d")
                              .replace(re.escape("{node}"), r"\S+"))
    # a peer's copy of a line reports as that peer: the node names go back to the render test's node-02
    as_rendered = lambda line: re.sub(r"\bnode-0[13]\b", "node-02", syslog_stamp.sub("", line))  # noqa: E731
    lines = {as_rendered(line) for case in load_cases([RENDERED_DIR]) for log in case.logs.values() for line in log}
    assert lines <= rendered, sorted(lines - rendered)[:3]



# ---------------------------------------------------------------------------------------------- causal chains
CHAIN_ROWS, _ = load_chains()
LINKED = re.compile(r": chain ([\w.]+)\]")  # how the ranking marks a root hit a chain made its cause's symptom (or recovered)


def chains_linked(folder: Path) -> dict[str, set[str]]:
    """Case id -> the causal chains that made one of its root hits a symptom of its cause (one run per folder)."""
    outcomes = attribute_cases(load_cases([folder]))
    return {case_id: {m for hit in hits for m in LINKED.findall(hit.get("summary") or "")}
            for case_id, (_, hits, _, _) in outcomes.items()}


@pytest.fixture(scope="module")
def linked():
    return {"rendered": chains_linked(RENDERED_DIR), "corpus": chains_linked(CORPUS_DIR)}


def test_corpus_and_rendered_cases_cover_every_chain(linked):
    covered = {folder: set().union(*cases.values()) for folder, cases in linked.items()}
    every = {row["id"] for row in CHAIN_ROWS}
    assert every <= covered["rendered"] | covered["corpus"], sorted(every - covered["rendered"] - covered["corpus"])


def test_each_rendered_chain_case_links_its_chain(linked):
    for path in sorted(RENDERED_DIR.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in doc["cases"]:
            missing = set(case.get("chains") or ()) - linked["rendered"][f"{doc['rule']}::{case['name']}"]
            assert not missing, f"{case['name']}: no hit made a symptom by {sorted(missing)}"

