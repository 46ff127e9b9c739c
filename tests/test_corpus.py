"""The real-line corpus (tests/corpus/*.yaml): multi-node attempts assembled from verbatim lines of public bug
reports, each with its expected verdict, domain, subdomain and culprit nodes, attributed in one run and scored.

The files use the fixture format of docs/rules.md (cases with `logs`, `context`, `expect`, `sources`). `expect` holds
what a person reading the lines would conclude; a key left out is not scored, and `no_hits` lists causes the
attempt must not be given. The score is reported separately from the simulator's (docs/accuracy.md):

    python tests/test_corpus.py        # prints the scorecard and the confusion matrix

The test pins the floor of the score and requires zero confident-wrong verdicts: an attempt attributed to a
domain, subdomain or culprit other than the expected one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from firstfault.rules_sql.cases import attribute_cases, load_cases

CORPUS_DIR = Path(__file__).parent / "corpus"
SCORED = ("verdict", "domain", "subdomain", "culprit_nodes")
MIN_ATTEMPTS = 40
MIN_CORRECT = 0.9  # the pinned floor: raise it when the corpus scores better, never lower it to pass


def score(cases, outcomes) -> dict:
    """Per case: correct (every scored key and no unwanted hit) or not; confident-wrong = attributed to another
    cause than expected; confusion of expected vs got domain (verdict in parentheses when not attributed)."""
    rows, confusion = [], Counter()
    for case in cases:
        verdict, hits, _ = outcomes[case.id]
        want = case.expect
        wrong = [k for k in SCORED if k in want and verdict[k] != want[k]]
        unwanted = [u for u in want.get("no_hits", []) if any(all(h.get(k) == v for k, v in u.items()) for h in hits)]
        attributed = verdict["verdict"] == "attributed"
        expected_label = want.get("domain") or f"({want.get('verdict', 'any')})"
        got_label = verdict["domain"] if attributed else f"({verdict['verdict']})"
        confusion[(expected_label, got_label)] += 1
        rows.append({
            "case": case.id, "correct": not wrong and not unwanted,
            "confident_wrong": attributed and (bool(unwanted) or (want.get("verdict") == "attributed" and bool(wrong))
                                               or want.get("verdict") in ("unattributed", "not_failed")),
            "confidence": (verdict.get("quality") or {}).get("confidence"),
            "got": {k: verdict[k] for k in SCORED}, "wrong": wrong, "unwanted": unwanted,
        })
    n = len(rows)
    return {"attempts": n, "correct": sum(r["correct"] for r in rows), "accuracy": sum(r["correct"] for r in rows) / n if n else None,
            "confident_wrong": [r for r in rows if r["confident_wrong"]], "misses": [r for r in rows if not r["correct"]],
            "confusion": confusion}


def render(result: dict) -> str:
    out = [f"real-line corpus: {result['correct']}/{result['attempts']} correct ({100 * result['accuracy']:.1f} %), "
           f"confident wrong {len(result['confident_wrong'])}", "", "confusion (rows: expected, columns: got)"]
    rows = sorted({e for e, _ in result["confusion"]})
    cols = sorted({g for _, g in result["confusion"]})
    width = max(len(c) for c in rows + cols) + 2
    out.append("".ljust(width) + "".join(c.rjust(width) for c in cols))
    out += [r.ljust(width) + "".join(str(result["confusion"].get((r, c), 0) or ".").rjust(width) for c in cols) for r in rows]
    out += ["", "misses:"] + [f"  {m['case']}: got {m['got']} wrong {m['wrong']} unwanted {m['unwanted']}" for m in result["misses"]]
    return "\n".join(out)


@pytest.fixture(scope="module")
def corpus_result():
    cases = load_cases([CORPUS_DIR])
    return cases, score(cases, attribute_cases(cases))


def test_corpus_is_large_enough(corpus_result):
    cases, _ = corpus_result
    assert len(cases) >= MIN_ATTEMPTS
    assert all(len(c.logs) >= 2 or len(c.context.get("nodes", [])) >= 2 for c in cases), "every attempt is multi-node"


def test_corpus_has_no_confident_wrong_verdict(corpus_result):
    _, result = corpus_result
    assert not result["confident_wrong"], render(result)


def test_corpus_score_does_not_drop(corpus_result):
    _, result = corpus_result
    assert result["accuracy"] >= MIN_CORRECT, render(result)


if __name__ == "__main__":
    corpus = load_cases([CORPUS_DIR])
    print(render(score(corpus, attribute_cases(corpus))))
