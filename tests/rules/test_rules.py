"""Every rule's positive and negative fixtures (tests/rules/<rule_id>.yaml), attributed in one rules pass."""
from pathlib import Path

import pytest

from firstfault.rules_sql.engine import load_rules
from firstfault.rules_sql.cases import load_cases, run_cases

HERE = Path(__file__).parent
CASES = load_cases([HERE])


@pytest.fixture(scope="module")
def outcomes():
    return run_cases(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_case(case, outcomes):
    assert outcomes[case.id] == [], f"{case.path.name} {case.name}: " + "; ".join(outcomes[case.id])


@pytest.mark.parametrize("rule", load_rules(), ids=lambda r: r.id)
def test_every_rule_has_positive_and_negative_cases(rule):
    kinds = {c.kind for c in CASES if c.rule == rule.id}
    assert kinds == {"positive", "negative"}, f"{rule.id} needs positive and negative fixtures in tests/rules/{rule.id}.yaml"
