"""The real-line corpus (tests/corpus/*.yaml): multi-node attempts assembled from verbatim lines of public bug
reports, each with its expected verdict, domain, subdomain and culprit nodes, scored the way CI and a user score it:

    firstfault evaluate --corpus tests/corpus        # the scorecard, the confusion matrix, the confident-wrong list

The score is reported separately from the simulator's (docs/accuracy.md). The test pins the floor of the score and
requires zero confident-wrong verdicts.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from firstfault.cli import main
from firstfault.rules_sql.cases import load_cases

CORPUS_DIR = Path(__file__).parent / "corpus"
SMALLEST = "filesystem.yaml"  # one small file of the corpus, for the text scorecard
MIN_ATTEMPTS = 150
MIN_CORRECT = 1.0  # the pinned floor: raise it when the corpus scores better, never lower it to pass


@pytest.fixture(scope="module")
def corpus_result():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["-q", "evaluate", "--corpus", str(CORPUS_DIR), "--json"]) == 0
    return json.loads(out.getvalue())


def test_corpus_is_large_and_multi_node():
    cases = load_cases([CORPUS_DIR])
    assert len(cases) >= MIN_ATTEMPTS
    assert all(len(c.logs) >= 2 or len(c.context.get("nodes", [])) >= 2 for c in cases), "every attempt is multi-node"


def test_corpus_has_no_confident_wrong_verdict(corpus_result):
    assert corpus_result["confident_wrong"] == 0, corpus_result["confident_wrong_attempts"]


def test_corpus_score_does_not_drop(corpus_result):
    assert corpus_result["scored"] >= MIN_ATTEMPTS, corpus_result
    assert corpus_result["accuracy"] >= MIN_CORRECT, corpus_result["misses"]


def test_scorecard_text_has_the_measures_and_the_confusion_matrix(tmp_path, capsys):
    shutil.copy(CORPUS_DIR / SMALLEST, tmp_path)
    assert main(["-q", "evaluate", "--corpus", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "correct" in out and "confident wrong     0" in out and "confusion (rows: expected" in out


@pytest.mark.parametrize("argv, field", [
    (["--corpus", "no-such-folder"], "field 'corpus'"),
    (["--corpus", str(CORPUS_DIR), "--warehouse", "w.duckdb"], "field '--warehouse'"),
])
def test_bad_corpus_input_is_one_line(argv, field, capsys):
    assert main(["evaluate", *argv]) == 2
    err = capsys.readouterr().err
    assert field in err and len(err.strip().splitlines()) == 1


def test_truth_and_corpus_are_exclusive(capsys):
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--truth", "fleet", "--corpus", str(CORPUS_DIR)])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err
