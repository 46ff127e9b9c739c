"""The rendered multi-node cases (tests/rendered/*.yaml, rules_sql/rendered_cases.py): the folder is exactly what the
catalogue renders (regenerate it after a catalogue change), it scores 100 % with no confident-wrong verdict beside the
real-line corpus, and the two folders together cover every family (catalogue file) of the catalogue: the rendered
cases by the entries they are built from, the corpus by the catalogue's real lines it quotes."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from firstfault.cli import main
from firstfault.rules_sql.cases import load_cases
from firstfault.rules_sql.rendered_cases import write_rendered_cases
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
    lines = {line for case in load_cases([RENDERED_DIR]) for log in case.logs.values() for line in log}
    assert lines <= rendered, sorted(lines - rendered)[:3]
