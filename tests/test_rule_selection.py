"""A rule pass leaves out a rule only when none of the event kinds its rows come from is in the run: its `needs:`
header, else an `inputs:` header that names nothing but event kinds (rules_sql/selection.py); rules with neither
always run. Every built-in rule's header is checked against the rule kit: run with no rule left out, a rule hits only
cases whose events include one of the kinds its header names."""
from pathlib import Path

import pytest

import firstfault.rules_sql.engine as engine
from firstfault.errors import BadInput
from firstfault.rules_sql.cases import attribute_cases, load_cases
from firstfault.rules_sql.engine import builtin_rules_dir, load_rule, load_rules
from firstfault.rules_sql.selection import event_kinds_read, needed_rules

# Each probe hits every attempt from `attempts` alone: a hit in rule_hits shows that the rule was run.
PROBE = """\
-- id: {id}
-- detects: nothing real: shows whether the rule pass ran it
-- domain: software/probe
-- inputs: {inputs}
SELECT attempt_id, NULL AS event_id, '{id}' AS rule_id, 'symptom' AS role, 'software' AS domain, 'probe' AS subdomain,
       NULL AS culprit_node, NULL AS culprit_rank, NULL AS gpu, 'job' AS granularity, 0.01 AS strength, start_ts AS ts,
       'probe' AS summary, 'investigate' AS action
FROM attempts
"""

PROBES = {
    "probe_absent_kinds": "events(kind in no_such_kind, nor_this_one)",
    "probe_present_kind": "events(kind = pcie_aer)",
    "probe_reads_attempts": "attempts",
    "probe_kinds_and_attempts": "events(kind = no_such_kind), attempts(nodes)",
    "probe_needs_absent_kind": "attempts\n-- needs: no_such_kind, nor_this_one",
    "probe_needs_present_kind": "attempts\n-- needs: no_such_kind, pcie_aer",
}

CASE = """\
rule: probe_present_kind
cases:
  - name: one_pcie_error
    kind: positive
    logs:
      syslog/node-02:
        - "Nov 29 01:40:01 node-02 kernel: pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0"
        - "Nov 29 01:40:01 node-02 kernel: pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"
    expect:
      verdict: attributed
"""


def test_header_of_kinds_only_is_read_and_anything_else_is_not():
    assert event_kinds_read({"inputs": "events(kind in cuda_oom, nccl_cuda)"}) == {"cuda_oom", "nccl_cuda"}
    assert event_kinds_read({"inputs": "events(kind = nan_loss)"}) == {"nan_loss"}
    for other in ("attempts", "events", "events(kind = step_timing, rank known)", "events(kind in a, b), attempts",
                  "progress (rank_progress), events(kind in a)", "events(kind in a, b),", ""):
        assert event_kinds_read({"inputs": other}) is None, other
    assert event_kinds_read({}) is None
    assert event_kinds_read({"inputs": "events(kind in a, b), attempts", "needs": "a, b"}) == {"a", "b"}


@pytest.mark.parametrize("needs", ["xid,gsp_heartbeat", "events(kind = xid)", "Xid", ""])
def test_a_needs_header_that_is_not_a_list_of_kinds_is_bad_input(tmp_path, needs):
    path = tmp_path / "probe.sql"
    path.write_text(PROBE.format(id="probe", inputs=f"attempts\n-- needs: {needs}"))
    with pytest.raises(BadInput) as e:
        load_rule(path)
    assert (e.value.field, e.value.file) == ("needs", str(path))


def test_rule_whose_kinds_are_absent_is_skipped_and_one_without_such_header_runs(tmp_path):
    for rule_id, inputs in PROBES.items():
        (tmp_path / f"{rule_id}.sql").write_text(PROBE.format(id=rule_id, inputs=inputs))
    (tmp_path / "probe_present_kind.yaml").write_text(CASE)
    cases = load_cases([tmp_path])
    _verdict, hits, _evidence, _events = attribute_cases(cases, [tmp_path])[cases[0].id]
    probes_run = {h["rule_id"] for h in hits if h["rule_id"].startswith("probe_")}
    assert probes_run == {"probe_present_kind", "probe_reads_attempts", "probe_kinds_and_attempts", "probe_needs_present_kind"}
    assert "pcie_aer" in {h["rule_id"] for h in hits}


def test_rules_without_inputs_header_always_run():
    class Bare:
        header = {"id": "bare"}

    bare = Bare()
    assert needed_rules([bare], []) == [bare]
    assert needed_rules([bare], ["xid"]) == [bare]


def test_builtin_rules_skippable_set():
    """The built-in rules a run can leave out: each reads `events` of its header's kinds only (a change to a header
    that makes a rule skippable is a decision to review here)."""
    skippable = {r.id for r in load_rules() if event_kinds_read(r.header) is not None}
    assert skippable == {
        "collective_mismatch", "collective_straggler", "cuda_error", "cuda_oom", "dcgm_gpu_health", "driver_mismatch",
        "filesystem_error", "flight_recorder_missing", "gpu_fallen_off_bus", "host_memory_error", "host_oom",
        "ib_link_kernel", "ib_port_flaps", "kernel_fault", "kubernetes_disruption", "launcher_first_failure", "nan_loss",
        "nccl_peer_pattern", "node_vanished", "nvswitch_fabric", "pcie_aer", "python_exception", "roce_gid", "segfault",
        "slurm_messages", "straggler", "watchdog_stuck", "xid_root",
    }
    assert all(Path(r.path).suffix == ".sql" for r in load_rules() if r.id in skippable)


def test_every_builtin_rule_hits_only_through_the_kinds_its_header_names(monkeypatch):
    """The rule kit with no rule left out: a skippable rule's hits all come from cases that have one of its kinds (a
    header that names too few kinds would drop real hits from a pass)."""
    monkeypatch.setattr(engine, "needed_rules", lambda rules, kinds_present: list(rules))
    kinds_of = {r.id: event_kinds_read(r.header) for r in load_rules()}
    cases = load_cases([builtin_rules_dir()])
    wrong = []
    for case_id, (_verdict, hits, _evidence, events) in attribute_cases(cases).items():
        present = {e["kind"] for e in events}
        wrong += [(case_id, h["rule_id"]) for h in hits if (kinds := kinds_of.get(h["rule_id"])) is not None and not kinds & present]
    assert hits and not wrong, wrong[:10]
