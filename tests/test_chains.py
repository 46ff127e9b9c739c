"""The causal chains (rules_sql/chains.yaml, docs/DESIGN.md §4.2): every row has a source and a fixture in
rules_sql/_chains.yaml whose verdict changes when the row is removed; the chains form no cycle; a malformed row is
one BadInput naming its field.

The fixtures are landed once; each removal re-runs only the rule pass of its fixture's attempt with a chains file
that lacks the row (about 0.2 s each)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from firstfault.errors import BadInput
from firstfault.rules_sql import chains as chains_module
from firstfault.rules_sql.cases import land_cases, load_cases
from firstfault.rules_sql.chains import chains_path, load_chains
from firstfault.rules_sql.engine import builtin_rules_dir
from firstfault.run import attribute, load_rule_set

ROWS, _ = load_chains()
BY_ID = list({row["id"]: row for row in ROWS}.values())  # a row listing several classes loads as several, one id
CASES = {c.name: c for c in load_cases([builtin_rules_dir()]) if c.rule == "_chains"}
VERDICT = ("verdict", "domain", "subdomain", "culprit_nodes")


def _decision(row: dict) -> tuple:
    """What a chain can decide: the verdict, and which causes stay candidates (a chain makes its effect a symptom
    instead of a rival; with the cause model, the rival often loses anyway, but the verdict names it as the runner-up)."""
    return tuple(row[k] for k in VERDICT) + (tuple((c["domain"], c["subdomain"], tuple(c["nodes"])) for c in row["candidates"]),)
MIN_CHAINS = 25


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    """The fixtures landed once, and their verdicts with every chain (one rule pass)."""
    root = tmp_path_factory.mktemp("chains")
    wanted = sorted({row["fixture"] for row in ROWS})
    config, contexts = land_cases([CASES[name] for name in wanted], root)
    contexts = {name: contexts[CASES[name].id] for name in wanted}
    rules = load_rule_set(config)
    rows = attribute(list(contexts.values()), config, rules).tables["attributions"].to_pylist()
    by_id = {row["attempt_id"]: _decision(row) for row in rows}
    return config, contexts, rules, {name: by_id[ctx.attempt_id] for name, ctx in contexts.items()}


def _verdict(landed, name: str) -> tuple:
    config, contexts, rules, _ = landed
    return _decision(attribute([contexts[name]], config, rules).tables["attributions"].to_pylist()[0])


def test_there_are_enough_chains_each_with_a_source_and_a_fixture():
    assert len(BY_ID) >= MIN_CHAINS
    for row in ROWS:
        assert row["source"].startswith("https://") and row["why"], row["id"]
        assert row["fixture"] in CASES, f"{row['id']}: no case {row['fixture']!r} in rules_sql/_chains.yaml"


@pytest.mark.parametrize("row", BY_ID, ids=[r["id"] for r in BY_ID])
def test_removing_a_chain_changes_its_fixtures_verdict(row, landed, tmp_path, monkeypatch):
    case = CASES[row["fixture"]]
    with_row = landed[3][row["fixture"]]
    assert with_row[:len(VERDICT)] == tuple(case.expect.get(k, v) for k, v in zip(VERDICT, with_row)), "the fixture passes with the row"
    doc = yaml.safe_load(chains_path().read_text(encoding="utf-8"))
    doc["chains"] = [c for c in doc["chains"] if c["id"] != row["id"]]
    without = tmp_path / "chains.yaml"
    without.write_text(yaml.safe_dump(doc), encoding="utf-8")
    monkeypatch.setattr(chains_module, "chains_path", lambda: without)
    assert _verdict(landed, row["fixture"]) != with_row, f"{row['id']} decides nothing in {row['fixture']}"


def _side_overlaps(effect: dict, cause: dict) -> bool:
    """Whether some hit could be of both an effect's class and a cause's class."""
    for key in ("domain", "subdomain", "kind"):
        a, b = effect[key], cause[key]
        if a is not None and b is not None and a != b:
            return False
    return True


def _exclusive(a: dict, b: dict) -> bool:
    """A `when` row and an `unless` row of one condition, scope, window and `unstamped` policy: the condition is tested
    on the same pair of hits the same way, so they never both hold."""
    same = ("scope", "before_s", "after_s", "unstamped") + tuple(f"condition_{k}" for k in ("domain", "subdomain", "kind", "codes", "texts"))
    return {a["condition_present"], b["condition_present"]} == {True, False} and all(a[k] == b[k] for k in same)


def test_the_chains_form_no_cycle():
    """An effect demoted by one row may be the cause of another (a class-based cause is a root hit); a cause given by
    event kind alone is any event, whatever its role, so nothing leads into it; a `when` row and its exclusive
    `unless` row never lead into each other."""
    sides = lambda r, s: {k: r[f"{s}_{k}"] for k in ("domain", "subdomain", "kind")}
    edges = {r["id"]: [o["id"] for o in ROWS if o["cause_domain"] is not None and not _exclusive(r, o)
                       and _side_overlaps(sides(r, "effect"), sides(o, "cause"))] for r in ROWS}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 1:
            raise AssertionError("cycle: " + " -> ".join(path + [node]))
        if state.get(node) == 2:
            return
        state[node] = 1
        for nxt in edges[node]:
            visit(nxt, path + [node])
        state[node] = 2

    for r in ROWS:
        visit(r["id"], [])


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("source"), "chains[0].source"),
    (lambda r: r.update(source="see the docs"), "chains[0].source"),
    (lambda r: r.update(scope="rack"), "chains[0].scope"),
    (lambda r: r.update(window=[60, -60]), "chains[0].window"),
    (lambda r: r.update(cause={"codes": [79]}), "chains[0].cause"),
    (lambda r: r.update(effect={"class": "hardware"}), "chains[0].effect.class"),
    (lambda r: r.update(cause={"class": []}), "chains[0].cause.class"),
    (lambda r: r.update(cause={"class": ["hardware/gpu_lost", "hardware"]}), "chains[0].cause.class"),
    (lambda r: r.update(colour="red"), "chains[0].colour"),
    (lambda r: r.update(when={"class": "network/nic"}, unless={"class": "network/nic"}), "chains[0].unless"),
    (lambda r: r.update(unless={"class": ["network/nic", "network/ib_link"]}), "chains[0].unless.class"),
    (lambda r: r.update(unless={"codes": [79]}), "chains[0].unless"),
])
def test_a_malformed_row_is_one_bad_input_naming_its_field(mutate, field, tmp_path):
    doc = yaml.safe_load(chains_path().read_text(encoding="utf-8"))
    mutate(doc["chains"][0])
    path = tmp_path / "chains.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(BadInput) as e:
        load_chains(path)
    assert field in str(e.value)


def test_a_when_row_without_its_exclusive_unless_row_is_a_cycle():
    """The exception is exact: the pair of rows that lead into each other must agree on condition, scope and window."""
    when = next(r for r in ROWS if r["condition_present"] is True)
    unless = next(r for r in ROWS if r["condition_present"] is False)
    assert _exclusive(when, unless) and _exclusive(unless, when)
    assert not _exclusive(when, {**unless, "after_s": unless["after_s"] + 1})
    assert not _exclusive(when, {**unless, "condition_present": True})


def test_the_chains_file_is_no_fixture_file():
    assert all(c.path.name != Path(chains_path()).name for c in load_cases([builtin_rules_dir()]))
