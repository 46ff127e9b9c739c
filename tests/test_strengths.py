"""The strengths table (rules_sql/strengths.yaml, docs/DESIGN.md §4.2): every rule reads its strength from it through
`strength('<key>')`, every row is used, a key the table lacks is a load-time error naming file and line, the table is
checked against its tiers, and changing it changes rules_version."""
from pathlib import Path

import duckdb
import pytest
import yaml

from firstfault.cli import main
from firstfault.config import AttributionSettings
from firstfault.errors import BadInput
from firstfault.rules_sql import engine, strengths
from firstfault.rules_sql.cases import land_cases, load_cases
from firstfault.rules_sql.engine import load_rule, load_rules, register_reference, rules_version
from firstfault.rules_sql.strengths import USE, load_strengths, strength, strengths_path
from firstfault.run import attribute

RULES = Path(__file__).resolve().parents[1] / "rules_sql"

SITE_RULE = """\
-- id: lustre_error
-- detects: a Lustre client error
-- domain: software/filesystem
-- inputs: events(kind = lustre_error)
SELECT attempt_id, event_id, 'lustre_error' AS rule_id, 'root' AS role, 'software' AS domain, 'filesystem' AS subdomain,
       node AS culprit_node, NULL AS culprit_rank, NULL AS gpu, 'node' AS granularity,
       {strength} AS strength, ts, 'Lustre error' AS summary, 'investigate' AS action
FROM events
WHERE kind = 'lustre_error'
"""


def used_keys() -> set[str]:
    return {key for path in RULES.glob("*.sql") for key in USE.findall(path.read_text(encoding="utf-8"))}


def test_every_row_is_used_and_every_key_used_is_a_row():
    assert used_keys() == set(load_strengths())


def test_every_hit_of_the_rule_kit_takes_its_strength_from_the_table(tmp_path, monkeypatch):
    """With every value of the table moved off the 0.05 grid, no hit keeps a value that is not in the moved table: no
    rule writes a strength of its own."""
    moved = {key: {**row, "strength": row["strength"] + 0.001} for key, row in load_strengths().items()}
    monkeypatch.setattr(strengths, "shipped_strengths", lambda: moved)
    cases = load_cases([RULES])
    config, contexts = land_cases(cases, tmp_path)
    hits = attribute(list(contexts.values()), config).tables["rule_hits"].to_pylist()
    allowed = {row["strength"] for row in moved.values()}
    stray = sorted({(h["rule_id"], h["strength"]) for h in hits if h["strength"] not in allowed}, key=str)
    assert len(hits) > len(cases) and not stray


def test_the_macro_python_and_the_table_agree():
    con = duckdb.connect()
    register_reference(con, AttributionSettings(), "test")
    table = dict(con.execute("SELECT key, strength FROM strengths").fetchall())
    assert table == {key: row["strength"] for key, row in load_strengths().items()}
    for key, value in table.items():
        assert con.execute("SELECT strength(?)", [key]).fetchone()[0] == value == strength(key)


def test_every_row_sits_in_its_tier_and_says_why():
    doc = yaml.safe_load(strengths_path().read_text(encoding="utf-8"))
    tiers = {t["name"]: (t["from"], t["to"]) for t in doc["tiers"]}
    bounds = sorted(tiers.values())
    assert all(a[1] < b[0] for a, b in zip(bounds, bounds[1:])), "tiers overlap"
    for row in load_strengths().values():
        assert tiers[row["tier"]][0] <= row["strength"] <= tiers[row["tier"]][1] and row["why"], row["key"]


@pytest.mark.parametrize("edit,field", [
    (lambda d: d["strengths"][0].update(strength=0.5), "strengths[0].strength"),   # outside its tier
    (lambda d: d["strengths"][0].update(tier="strong"), "strengths[0].tier"),
    (lambda d: d["strengths"][1].update(key=d["strengths"][0]["key"]), "strengths[1].key"),
    (lambda d: d["strengths"][0].pop("why"), "strengths[0].why"),
    (lambda d: d["strengths"][0].update(source="docs.nvidia.com"), "strengths[0].source"),
    (lambda d: d["tiers"][0].pop("means"), "tiers[0]"),
])
def test_a_malformed_table_names_row_and_field(tmp_path, edit, field):
    doc = yaml.safe_load(strengths_path().read_text(encoding="utf-8"))
    edit(doc)
    path = tmp_path / "strengths.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(BadInput) as e:
        load_strengths(path)
    assert (e.value.file, e.value.field) == (str(path), field)


def test_an_unknown_key_is_a_load_time_error_naming_file_and_line(tmp_path, capsys):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "lustre_error.sql").write_text(SITE_RULE.format(strength="strength('lustre.timeout')"))
    with pytest.raises(BadInput) as e:
        load_rule(rules / "lustre_error.sql")
    assert (e.value.field, e.value.problem.split(" (")[0]) == ("line 7", "unknown strength key 'lustre.timeout'")
    assert main(["rules", "lint", str(rules)]) == 1
    assert f"{rules / 'lustre_error.sql'}: field 'line 7': unknown strength key 'lustre.timeout'" in capsys.readouterr().out
    (rules / "lustre_error.sql").unlink()
    (rules / "lustre_py.py").write_text(
        'RULE = {"id": "lustre_py", "detects": "x", "domain": "software/filesystem", "inputs": "events"}\n\n'
        "def hits(con):\n    return con.sql(\"SELECT strength('lustre.timeout') AS s\")\n")
    with pytest.raises(BadInput) as e:
        load_rule(rules / "lustre_py.py")
    assert e.value.field == "line 4"


def test_a_site_rule_gives_its_strength_by_key_or_as_a_number(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    con = duckdb.connect()
    engine.register_empty_inputs(con)
    register_reference(con, AttributionSettings(), "test")
    engine.create_shared_views(con)
    for given, value in (("strength('filesystem.network_client')", 0.6), ("0.65", 0.65)):
        (rules / "lustre_error.sql").write_text(SITE_RULE.format(strength=given))
        rule = load_rule(rules / "lustre_error.sql")
        engine.check_rule_output(con, rule)
        sql = rule.sql.replace("FROM events\nWHERE kind = 'lustre_error'", "FROM (SELECT 'a' AS attempt_id, 'e' AS event_id, "
                               "'node-01' AS node, TIMESTAMP '2026-11-29 01:40:03' AS ts)")
        assert float(con.execute(f"SELECT strength FROM ({sql})").fetchone()[0]) == value


def test_rules_version_changes_with_the_strengths(tmp_path, monkeypatch):
    rules = load_rules()
    before = rules_version(rules, AttributionSettings())
    moved = tmp_path / "strengths.yaml"
    text = strengths_path().read_text(encoding="utf-8")
    assert "{key: xid.fatal_hardware, strength: 0.95," in text
    moved.write_text(text.replace("{key: xid.fatal_hardware, strength: 0.95,", "{key: xid.fatal_hardware, strength: 0.9,"))
    monkeypatch.setattr(engine, "strengths_path", lambda: moved)
    assert rules_version(rules, AttributionSettings()) != before
