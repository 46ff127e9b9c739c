"""Every built-in fixture case (rules_sql/<id>.yaml beside rules_sql/<id>.sql, and the `_*.yaml` cases of the ranking
scripts), attributed in one rules pass."""
import pytest

from firstfault.rules_sql.cases import load_cases, run_cases
from firstfault.rules_sql.engine import builtin_rules_dir, load_rules

CASES = load_cases([builtin_rules_dir()])


@pytest.fixture(scope="module")
def outcomes():
    return run_cases(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_case(case, outcomes):
    assert outcomes[case.id] == [], f"{case.path.name} {case.name}: " + "; ".join(outcomes[case.id])


@pytest.mark.parametrize("rule", load_rules(), ids=lambda r: r.id)
def test_every_rule_has_positive_and_negative_cases(rule):
    kinds = {c.kind for c in CASES if c.rule == rule.id}
    assert kinds == {"positive", "negative"}, f"{rule.id} needs positive and negative fixtures in rules_sql/{rule.id}.yaml"
