"""A real-line corpus scored (`firstfault evaluate --corpus DIR`): multi-node attempts in the fixture format of
docs/rules.md, each expecting what a person reading its lines would conclude, attributed in one run and scored by
the scorecard the simulated fleet uses (synthetic/scorecard.py)."""
from __future__ import annotations

from pathlib import Path

from firstfault.synthetic import scorecard
from firstfault.errors import BadInput
from firstfault.rules_sql.cases import attribute_cases, load_cases


def evaluate_corpus(folder: str | Path) -> dict:
    """Attribute every case under `folder` and score it against its `expect`."""
    if not Path(folder).is_dir() or not any(Path(folder).glob("*.yaml")):
        raise BadInput(str(folder), "corpus", "no folder of *.yaml attempt files")
    cases = load_cases([Path(folder)])
    for case in cases:
        unknown = set(case.expect) - {*scorecard.SCORED, "no_hits"}
        if unknown:
            raise BadInput(str(case.path), f"{case.name}.expect", f"scores only {', '.join(scorecard.SCORED)} and no_hits, not {sorted(unknown)}")
    outcomes = attribute_cases(cases)
    return scorecard.score([(case.id, case.expect, outcomes[case.id][0], outcomes[case.id][1]) for case in cases])
