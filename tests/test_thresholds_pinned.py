"""Every threshold and tie-break of the decision is pinned by a fixture (docs/DESIGN.md §4.2): moving a threshold, or
flipping the ranking's earliest-onset tie-break, makes at least one rule-kit case fail. The cases are landed once and
attributed again per mutation."""
import dataclasses
from pathlib import Path

import pytest

from firstfault.rules_sql import engine
from firstfault.rules_sql.cases import _check, history_row, land_cases, load_cases
from firstfault.run import attribute, load_rule_set

RULES = Path(__file__).resolve().parents[1] / "rules_sql"
PINNING_FILES = ("_rank.yaml", "_why_not.yaml", "_thresholds.yaml", "_chains.yaml", "_confidence.yaml", "straggler.yaml")


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    cases = [c for c in load_cases([RULES]) if c.path.name in PINNING_FILES]
    config, contexts = land_cases(cases, tmp_path_factory.mktemp("pinned"))
    history = [history_row(c, contexts[c.id], i, h) for c in cases for i, h in enumerate(c.history)]
    return cases, config, contexts, history


def failing(landed, rules=None, **settings) -> set[str]:
    """The ids of the cases whose expectations fail with the [attribution] settings moved to `settings`."""
    cases, config, contexts, history = landed
    config = dataclasses.replace(config, attribution=dataclasses.replace(config.attribution, **settings))
    tables = attribute(list(contexts.values()), config, rules=rules, history=history).tables
    by_attempt = {name: {} for name in ("attributions", "rule_hits", "attribution_evidence")}
    for name, rows in by_attempt.items():
        for row in tables[name].to_pylist():
            rows.setdefault(row["attempt_id"], []).append(row)
    return {c.id for c in cases
            if _check(c, by_attempt["attributions"][contexts[c.id].attempt_id][0],
                      by_attempt["rule_hits"].get(contexts[c.id].attempt_id, []),
                      by_attempt["attribution_evidence"].get(contexts[c.id].attempt_id, []))}


def test_the_pinning_cases_pass_as_shipped(landed):
    assert failing(landed) == set()


# each threshold moved down and up, and the case that pins that side
MOVES = [
    ("ambiguity_margin", 0.05, "_confidence::an_ambiguous_verdict_is_low"),
    ("ambiguity_margin", 0.2, "_rank::the_same_cuda_error_printed_after_the_net_ib_error_does_not_win_by_strength"),
    ("witness_ratio", 1.5, "_thresholds::three_witnesses_against_two_stay_ambiguous"),
    ("witness_ratio", 6.0, "_thresholds::three_witnesses_against_one_decide"),
    ("min_witnesses", 2, "_rank::a_lost_gpu_named_by_two_peers_stays_ambiguous"),
    ("min_witnesses", 4, "_rank::a_lost_gpu_named_by_three_peers_beats_one_nobody_names"),
    ("survived_s", 150.0, "_thresholds::progress_280_s_after_a_link_down_does_not_survive_it"),
    ("survived_s", 600.0, "_thresholds::progress_320_s_after_a_link_down_survives_it"),
    ("late_penalty", 0.25, "_why_not::a_fatal_record_five_minutes_after_another_loses_as_late"),
    ("late_penalty", 0.75, "_rank::the_same_cuda_error_printed_after_the_net_ib_error_does_not_win_by_strength"),
    ("inadmissible_penalty", 0.2, "_thresholds::a_survived_link_down_stays_behind_a_straggler"),
    ("inadmissible_penalty", 0.5, "_thresholds::a_survived_link_down_stays_behind_a_straggler"),
    # capped at 1.0 and 0.025 still clears the margin: only removing the bonus changes that verdict
    ("corroboration_bonus", 0.0, "_thresholds::a_lost_gpu_two_rules_name_outscores_a_fatal_aer_by_more_than_the_margin"),
    ("corroboration_bonus", 0.1, "_thresholds::a_filesystem_error_three_sources_report_stays_behind_a_fatal_xid"),
    ("skew_tolerance_s", 0.0, "_chains::a_hung_task_panic_on_another_node_than_the_nfs_error_is_not_its_symptom"),
    ("skew_tolerance_s", 4.0, "_chains::a_cuda_error_on_another_node_than_the_xid_stays_its_own_cause"),
    ("kill_wait_s", 15.0, "_thresholds::a_timeout_with_no_line_explains_a_socket_reset_28_s_before_the_end"),
    ("kill_wait_s", 60.0, "_thresholds::a_timeout_with_no_line_leaves_a_socket_reset_40_s_before_the_end_a_cause"),
]


@pytest.mark.parametrize("name,value,pinned_by", MOVES)
def test_moving_a_threshold_fails_the_case_that_pins_it(landed, name, value, pinned_by):
    assert pinned_by in failing(landed, **{name: value})


def test_flipping_the_earliest_onset_tie_break_fails_a_case(landed, monkeypatch, tmp_path):
    run_script = engine._run_script
    tie_break = "coalesce(ts_lo, ts_hi) ASC NULLS LAST"

    def flipped(con, path):
        if path.name != "_rank_causes.sql":
            return run_script(con, path)
        text = path.read_text(encoding="utf-8")
        assert tie_break in text
        copy = tmp_path / "_rank_causes.sql"
        copy.write_text(text.replace(tie_break, "coalesce(ts_lo, ts_hi) DESC NULLS LAST"), encoding="utf-8")
        return run_script(con, copy)

    monkeypatch.setattr(engine, "_run_script", flipped)
    assert "_rank::of_two_agreeing_causes_with_equal_scores_the_earlier_is_the_root" in failing(landed)


def test_moving_the_straggler_threshold_to_1_6x_or_1_25x_fails_a_case(landed):
    cases, config, _, _ = landed
    shipped = load_rule_set(config)
    [straggler] = [r for r in shipped.rules if r.id == "straggler"]
    assert "compute_ms > 1.3 * peer_median" in straggler.sql
    for moved, pinned_by in (("1.6", "straggler::rank_computing_1_32x_its_peers_median_is_a_straggler"),
                             ("1.25", "straggler::rank_computing_1_28x_its_peers_median_is_not_a_straggler")):
        rules = dataclasses.replace(shipped, rules=[
            dataclasses.replace(r, sql=r.sql.replace("1.3 * peer_median", f"{moved} * peer_median")) if r is straggler else r
            for r in shipped.rules])
        assert pinned_by in failing(landed, rules=rules), moved
