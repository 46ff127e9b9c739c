"""[actions] policy, the drain reason, the Kubernetes cordon (against tests/fake_kube.py), the epilog's queueing rule
and the outbox of the sinks, without a cluster (the live loop: tests/test_automation.py)."""
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from fake_kube import FakeKube
from fake_scontrol import drains, fake_scontrol as stateful_scontrol

from firstfault.warehouse.actions import Decision, Drained, apply_actions, drain_reason, list_actions, plan, record, resume
from firstfault.cli import main
from firstfault.config import ActionSettings, Config, KubernetesSettings, load_config
from firstfault.connectors.node_control import ActionError, KubeNodes, SlurmNodes
from firstfault.connectors.slurm_epilog import is_failed
from firstfault.warehouse.store import connect_writer
from firstfault.warehouse.sinks import Outbox, chat_text

REPO = Path(__file__).resolve().parents[1]
ON = ActionSettings(enabled=True, dry_run=False, max_nodes_per_hour=2, max_fraction=0.5)
NONE_DRAINED = Drained(frozenset(), 0)


def verdict(**changes) -> dict:
    base = {
        "attempt_id": "ci/42/0", "cluster": "ci", "verdict": "attributed", "domain": "hardware", "subdomain": "gpu_lost",
        "culprit_nodes": ["node1"], "action": "drain_node", "quality": {"confidence": "high"},
        "root_cause": {"rule": "xid_root", "summary": "Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) on node1 GPU 0000:3b:00"},
        "evidence": [{"role": "root_cause", "text": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}],
    }
    return {**base, **changes}


def decided(v: dict, settings: ActionSettings = ON, drained: Drained = NONE_DRAINED, nodes: int = 4,
            members: frozenset = frozenset({"node1", "node2", "node3"})) -> list[tuple]:
    return [(d.node, d.status, d.reason) for d in plan(v, SlurmNodes(Config()), settings, drained, nodes, members)]


def the_scheduler_lists(config: Config, attempt_id: str, nodes: list[str]) -> None:
    """The attempt's row as a scheduler connector's load leaves it: its nodes are what [actions] may act on."""
    con = connect_writer(config.warehouse.path)
    try:
        con.execute("INSERT INTO attributions (attempt_id, workload_id, attempt, cluster, verdict, nodes) VALUES (?, ?, 0, 'ci', 'attributed', ?)",
                    [attempt_id, attempt_id.split("/")[1], nodes])
    finally:
        con.close()


def test_the_drain_reason_is_one_line_of_at_most_200_characters_ending_with_the_attempt():
    assert drain_reason(verdict()) == "firstfault: Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) on node1 GPU 0000:3b:00 (ci/42/0)"
    long = drain_reason(verdict(root_cause={"rule": "r", "summary": "a\x1b[31mb\nc\t" + "x" * 400}))
    assert len(long) == 200 and long.endswith("… (ci/42/0)") and long.startswith("firstfault: a [31mb c x")
    assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in long)


@pytest.mark.parametrize("changes, why", [
    ({"verdict": "ambiguous"}, "verdict ambiguous"),
    ({"verdict": "unattributed", "culprit_nodes": []}, "verdict unattributed"),
    ({"quality": {"confidence": "medium"}}, "confidence medium below min_confidence high"),
])
def test_ambiguous_unattributed_and_unsure_verdicts_never_drain(changes, why):
    assert [status for _, status, _ in decided(verdict(**changes))] == ["skipped"]
    assert decided(verdict(**changes))[0][2] == why


def test_only_drain_node_recommendations_are_decided_and_only_when_enabled():
    assert decided(verdict(action="restart_excluding_nodes")) == []
    assert decided(verdict(), replace(ON, enabled=False)) == []
    assert decided(verdict())[0][1] == "planned"


def test_exclusion_list_hourly_budget_and_fraction_of_the_cluster():
    assert decided(verdict(), replace(ON, exclude=("gpu-*", "node[0-9]")))[0][2] == "exclude"
    assert decided(verdict(), drained=Drained(frozenset(), 2))[0][2] == "max_nodes_per_hour"
    # 0.5 of 3 nodes, rounded up: 2 may be drained at once; one already is, so a second one may go, a third not
    two = verdict(culprit_nodes=["node2", "node3"])
    assert [s for _, s, _ in decided(two, drained=Drained(frozenset({("ci", "node1")}), 0), nodes=3)] == ["planned", "skipped"]
    assert decided(two, drained=Drained(frozenset({("ci", "node1")}), 0), nodes=3)[1][2].startswith("max_fraction")
    assert decided(verdict(), drained=Drained(frozenset({("ci", "node1")}), 0))[0][2] == "already drained by firstfault"
    # another cluster's drains do not count against this one's fraction
    assert decided(verdict(), drained=Drained(frozenset({("other", "n1"), ("other", "n2")}), 0), nodes=2)[0][1] == "planned"


@pytest.fixture
def fake_scontrol(tmp_path):
    """A `scontrol`/`sinfo` pair that records every argv (one JSON line each) and lists one node."""
    calls = tmp_path / "calls.jsonl"
    for name, out in (("scontrol", ""), ("sinfo", "node1\n")):
        script = tmp_path / name
        script.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                          f"print({out!r}, end='')\n")
        script.chmod(0o755)
    return tmp_path / "scontrol", calls


def config_for(tmp_path, scontrol: Path, **actions) -> Config:
    config = Config()
    return replace(config, warehouse=replace(config.warehouse, path=str(tmp_path / "wh.duckdb")),
                   slurm=replace(config.slurm, enabled=True, scontrol=str(scontrol)),
                   actions=replace(ON, max_fraction=1.0, **actions))


def test_slurm_drain_is_one_argv_element_and_every_decision_is_a_row(tmp_path, fake_scontrol):
    scontrol, calls = fake_scontrol
    config = config_for(tmp_path, scontrol, max_nodes_per_hour=1)
    the_scheduler_lists(config, "ci/42/0", ["node1"])
    the_scheduler_lists(config, "ci/43/0", ["node2"])
    tricky = verdict(root_cause={"rule": "xid_root", "summary": "Xid 79; rm -rf / `x` $(y) \"quoted\""})
    [done] = apply_actions(config, [tricky], "slurm")
    drains = [json.loads(x) for x in calls.read_text().splitlines() if "update" in x]
    assert drains == [["update", "NodeName=node1", "State=DRAIN", f"Reason={done.reason}"]]
    assert done.reason == 'firstfault: Xid 79; rm -rf / `x` $(y) "quoted" (ci/42/0)'
    [skipped] = apply_actions(config, [verdict(attempt_id="ci/43/0", culprit_nodes=["node2"])], "slurm")
    assert (skipped.status, skipped.reason) == ("skipped", "max_nodes_per_hour")
    rows = list_actions(config.warehouse.path)
    assert [(r["action_id"], r["attempt_id"], r["node"], r["rule"], r["status"]) for r in rows] == [
        (1, "ci/42/0", "node1", "xid_root", "done"), (2, "ci/43/0", "node2", "xid_root", "skipped")]
    assert all(r["decided_at"] is not None for r in rows)
    resume(config, 1)
    assert json.loads(calls.read_text().splitlines()[-1]) == ["update", "NodeName=node1", "State=RESUME"]
    with pytest.raises(Exception, match="resumed already"):
        resume(config, 1)
    with pytest.raises(Exception, match="no node was taken out"):
        resume(config, 2)


def test_ambiguous_verdicts_and_contexts_not_from_a_scheduler_connector_never_drain(tmp_path, fake_scontrol):
    scontrol, calls = fake_scontrol
    config = config_for(tmp_path, scontrol)
    [row] = apply_actions(config, [verdict(verdict="ambiguous")], "slurm")
    assert (row.status, row.reason) == ("skipped", "verdict ambiguous")
    assert apply_actions(config, [verdict()], "scheduler") == []  # a plug-in or a context posted to the API
    assert not calls.exists() or not [x for x in calls.read_text().splitlines() if "update" in x]


def test_dry_run_runs_nothing_and_says_what_it_would_run(tmp_path, fake_scontrol):
    scontrol, calls = fake_scontrol
    config = config_for(tmp_path, scontrol, dry_run=True)
    the_scheduler_lists(config, "ci/42/0", ["node1"])
    [row] = apply_actions(config, [verdict()], "slurm")
    assert row.status == "dry_run" and json.loads(row.command)[-1] == f"Reason={row.reason}"
    assert not [x for x in calls.read_text().splitlines() if "update" in x]


def test_kubernetes_cordon_is_a_patch_of_the_node_and_resume_uncordons():
    with FakeKube(REPO / "tests" / "fixtures" / "kueue") as kube, __import__("tempfile").TemporaryDirectory() as tmp:
        config = replace(Config(), kubernetes=KubernetesSettings(url=kube.url), actions=replace(ON, max_fraction=0.34, max_nodes_per_hour=5),
                         warehouse=replace(Config().warehouse, path=str(Path(tmp) / "wh.duckdb")))
        the_scheduler_lists(config, "ci/42/0", ["gpu-node-01", "gpu-node-02"])
        the_scheduler_lists(config, "ci/43/0", ["gpu-node-01", "gpu-node-03"])
        [row] = apply_actions(config, [verdict(culprit_nodes=["gpu-node-02"])], "kueue")
        assert (row.status, row.kind, row.node) == ("done", "cordon", "gpu-node-02")
        assert kube.patches == [("/api/v1/nodes/gpu-node-02", "application/strategic-merge-patch+json", {"spec": {"unschedulable": True}})]
        # 0.34 of 3 nodes rounds up to 2: one more may go, then none
        second, third = apply_actions(config, [verdict(attempt_id="ci/43/0", culprit_nodes=["gpu-node-01", "gpu-node-03"])], "kueue")
        assert (second.status, third.status) == ("done", "skipped") and third.reason.startswith("max_fraction")
        resume(config, 1)
        assert kube.patches[-1] == ("/api/v1/nodes/gpu-node-02", "application/strategic-merge-patch+json", {"spec": {"unschedulable": False}})


@pytest.mark.parametrize("env, failed", [
    ({"SLURM_JOB_EXIT_CODE2": "0:0", "SLURM_JOB_DERIVED_EC": "0"}, False),
    ({"SLURM_JOB_EXIT_CODE2": "1:0", "SLURM_JOB_DERIVED_EC": "0"}, True),
    ({"SLURM_JOB_EXIT_CODE2": "0:9", "SLURM_JOB_DERIVED_EC": "0"}, True),
    ({"SLURM_JOB_EXIT_CODE2": "0:0", "SLURM_JOB_DERIVED_EC": "2"}, True),
])
def test_the_epilog_queues_a_job_whose_exit_code_or_derived_exit_code_is_not_zero(env, failed):
    assert is_failed(env) is failed


def test_the_epilog_never_fails_the_slurm_epilog(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    for extra in ({}, {"SLURM_JOB_ID": "7", "SLURM_JOB_EXIT_CODE2": "1:0"}):
        done = subprocess.run([sys.executable, "-m", "firstfault.cli", "epilog", "--spool-dir", str(blocked / "spool")],
                              env={**env, **extra}, capture_output=True, text=True, cwd=tmp_path, timeout=30)
        assert done.returncode == 0 and "not queued" in done.stderr


def test_the_queueing_rule_is_configurable(tmp_path):
    (tmp_path / "ff.toml").write_text(f'[automation]\nspool_dir = "{tmp_path / "spool"}"\nqueue_all = true\n')
    env = {"SLURM_JOB_ID": "8", "SLURM_JOB_EXIT_CODE2": "0:0", "SLURM_JOB_DERIVED_EC": "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert main(["epilog", "--config", str(tmp_path / "ff.toml")]) == 0
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    [queued] = (tmp_path / "spool" / "queue").glob("*.json")
    assert json.loads(queued.read_text())["job_id"] == "8"


def test_a_sink_that_fails_keeps_the_verdict_until_it_takes_it(tmp_path):
    target = tmp_path / "out"
    target.write_text("")  # a file where the output's folder should be: the write fails
    config = load_config(None)
    config = replace(config, automation=replace(config.automation, outputs=(f"jsonl:{target / 'v.jsonl'}",), retry_s=5.0))
    outbox = Outbox(tmp_path / "outbox")
    assert outbox.put(config, [verdict()]) == 1
    assert outbox.flush(config, now=100.0) == (0, 1)
    assert outbox.flush(config, now=101.0) == (0, 1)  # not due before retry_s
    target.unlink()
    assert outbox.flush(config, now=106.0) == (1, 0)
    assert json.loads((target / "v.jsonl").read_text())["attempt_id"] == "ci/42/0"


def test_chat_text_names_attempt_verdict_culprit_root_line_action_and_report_page():
    text = chat_text(verdict(), "https://ff.example/report/")
    assert text.splitlines() == [
        "firstfault: ci/42/0 attributed hardware/gpu_lost", "culprit: node1",
        "root: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "action: drain_node",
        "report: https://ff.example/report/attempts/ci/42/0.html"]


@pytest.mark.parametrize("key, value", [("min_confidence", "certain"), ("max_fraction", 1.5), ("max_nodes_per_hour", -1)])
def test_policy_settings_out_of_range_are_bad_input(tmp_path, key, value):
    (tmp_path / "ff.toml").write_text(f"[actions]\nenabled = true\n{key} = {json.dumps(value)}\n")
    with pytest.raises(Exception, match=f"actions.{key}"):
        apply_actions(load_config(str(tmp_path / "ff.toml")), [verdict()], "slurm")


def test_the_worker_attributes_each_job_and_restart_count_once(tmp_path, monkeypatch):
    """A job queued twice is attributed once; a requeued job's attempts (restart counts 0 and 1) are two."""
    from firstfault.connectors.slurm_epilog import queue_job
    from firstfault.worker import Worker

    config = Config()
    config = replace(config, slurm=replace(config.slurm, enabled=True),
                     automation=replace(config.automation, spool_dir=str(tmp_path / "spool"), settle_s=0.0))
    for restart in ("0", "0", "1"):
        queue_job(config.automation.spool_dir, {"SLURM_JOB_ID": "5", "SLURM_JOB_EXIT_CODE2": "1:0", "SLURM_RESTART_COUNT": restart})
    asked = []
    monkeypatch.setattr(Worker, "attribute", lambda self, ref, last_try: asked.append(ref) or [verdict(attempt_id=f"ci/{ref.replace(':', '/')}")])
    worker = Worker(config)
    assert sorted(worker.run_pass()) == ["ci/5/0", "ci/5/1"]
    assert sorted(asked) == ["5:0", "5:1"]
    assert worker.run_pass() == [] and not list((tmp_path / "spool" / "queue").glob("*.json"))


def test_an_attempt_never_found_in_accounting_is_tried_again_then_set_aside_and_the_worker_goes_on(tmp_path, monkeypatch):
    from firstfault.connectors.slurm_epilog import queue_job
    from firstfault.worker import NotYet, Worker

    def not_in_accounting(self, ref, last_try):
        tries.append(ref)
        raise NotYet(f"no job {ref} in accounting")

    config = Config()
    config = replace(config, slurm=replace(config.slurm, enabled=True),
                     automation=replace(config.automation, spool_dir=str(tmp_path / "spool"), settle_s=0.0, retry_s=10.0, give_up_s=60.0))
    queue_job(config.automation.spool_dir, {"SLURM_JOB_ID": "6", "SLURM_JOB_EXIT_CODE2": "1:0"})
    tries = []
    monkeypatch.setattr(Worker, "attribute", not_in_accounting)
    worker = Worker(config)
    start = json.loads(next((tmp_path / "spool" / "queue").glob("*.json")).read_text())["queued_at"]
    assert worker.run_pass(now=start) == [] and worker.run_pass(now=start + 5) == [] and len(tries) == 1
    assert worker.run_pass(now=start + 11) == [] and len(tries) == 2
    worker.run_pass(now=start + 61)
    assert [p.name.split(".")[0] for p in (tmp_path / "spool" / "failed").glob("*.json")] == ["6"]


def test_the_worker_waits_for_a_missing_log_source_until_give_up(tmp_path, monkeypatch):
    import firstfault.worker as worker_module
    from firstfault.worker import NotYet, Worker

    (tmp_path / "app.log").write_text("step 1 loss 2.0\nRuntimeError: CUDA error: unspecified launch failure\n")
    spec = tmp_path / "attempt.yaml"
    spec.write_text(json.dumps({"workload_id": "77", "cluster": "ci", "state": "FAILED", "start": "2026-11-29T01:00:00Z",
                                "end": "2026-11-29T01:10:00Z", "nodes": ["node1"],
                                "logs": [{"source": "applog", "path": str(tmp_path / "app.log")},
                                         {"source": "syslog", "path": str(tmp_path / "kernel-{node}.log")}]}))
    monkeypatch.setattr(worker_module, "resolve_scheduler_specs", lambda config, kind, ref, where: [str(spec)])
    config = Config()
    config = replace(config, slurm=replace(config.slurm, enabled=True), lake=replace(config.lake, root=str(tmp_path / "lake")),
                     warehouse=replace(config.warehouse, path=str(tmp_path / "wh.duckdb")))
    worker = Worker(config)
    with pytest.raises(NotYet, match="syslog .*kernel-node1.log is missing"):
        worker.attribute("77:0", last_try=False)
    [v] = worker.attribute("77:0", last_try=True)  # the last try: the verdict stands, the missing source in its reports
    assert v["attempt_id"] == "ci/77/0" and any(r["status"] == "missing" for r in v["connector_reports"])


XID_FROM = "Nov 30 10:20:00 {host} kernel: [4242.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."
NCCL_FROM = "{host}:123:456 [0] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'"


@pytest.mark.parametrize("line, host, why", [
    (XID_FROM, "ALL", "ALL is scontrol's word for every node"),
    (XID_FROM, "node[1-4]", "hostlist syntax names several nodes"),
    (XID_FROM, "node3", "not among the attempt's 2 node(s) from the scheduler"),
    (NCCL_FROM, "node[1-4]", "hostlist syntax names several nodes"),
    (NCCL_FROM, "ALL", "ALL is scontrol's word for every node"),
])
def test_a_host_named_only_by_a_log_line_is_refused_and_never_drained(tmp_path, fake_scontrol, line, host, why):
    scontrol, calls = fake_scontrol
    config = config_for(tmp_path, scontrol, min_confidence="medium", max_nodes_per_hour=10)
    the_scheduler_lists(config, "ci/42/0", ["node1", "node2"])
    forged = verdict(culprit_nodes=[host], quality={"confidence": "medium"},
                     evidence=[{"role": "root_cause", "text": line.format(host=host)}])
    [row] = apply_actions(config, [forged], "slurm")
    assert (row.node, row.status) == (host, "refused") and row.reason.startswith(why)
    assert [(r["node"], r["status"]) for r in list_actions(config.warehouse.path)] == [(host, "refused")]
    assert not calls.exists() or not [x for x in calls.read_text().splitlines() if "update" in x]


def test_a_verdict_naming_its_node_and_a_claimed_one_drains_only_its_node(tmp_path, fake_scontrol):
    scontrol, calls = fake_scontrol
    config = config_for(tmp_path, scontrol, max_nodes_per_hour=10)
    the_scheduler_lists(config, "ci/42/0", ["node1", "node2"])
    rows = apply_actions(config, [verdict(culprit_nodes=["node[1-4]", "node1"])], "slurm")
    assert [(r.node, r.status) for r in rows] == [("node[1-4]", "refused"), ("node1", "done")]
    assert [json.loads(x)[1] for x in calls.read_text().splitlines() if "update" in x] == ["NodeName=node1"]


@pytest.mark.parametrize("name", ["../../../apis/apps/v1/namespaces/prod/deployments/web", "node3?dryRun=All",
                                  "node3%2F..", "Node3", "node3/"])
def test_a_kubernetes_node_name_that_is_not_one_is_never_sent(name):
    with FakeKube(REPO / "tests" / "fixtures" / "kueue") as kube, __import__("tempfile").TemporaryDirectory() as tmp:
        config = replace(Config(), kubernetes=KubernetesSettings(url=kube.url), actions=replace(ON, max_fraction=1.0),
                         warehouse=replace(Config().warehouse, path=str(Path(tmp) / "wh.duckdb")))
        the_scheduler_lists(config, "ci/42/0", [name])  # even a node list holding it does not make it a name
        [row] = apply_actions(config, [verdict(culprit_nodes=[name])], "kueue")
        assert (row.status, row.reason) == ("refused", "not a Kubernetes node name: a claim of the log, not a node of the attempt")
        with pytest.raises(ActionError, match="not a Kubernetes node name"):
            KubeNodes(config).take_out(name, "r")
        assert kube.patches == []
        assert KubeNodes(config).command("gpu-node-01", "r").startswith("PATCH /api/v1/nodes/gpu-node-01 ")


ACT = """
import json, sys
from dataclasses import replace
from firstfault.config import Config
from firstfault.warehouse.actions import apply_actions
config = Config()
config = replace(config, warehouse=replace(config.warehouse, path=sys.argv[1]), slurm=replace(config.slurm, enabled=True, scontrol=sys.argv[2]),
                 actions=replace(config.actions, enabled=True, dry_run=False, max_fraction=1.0, max_nodes_per_hour=1))
apply_actions(config, [json.loads(sys.argv[3])], "slurm")
"""


def act_in_a_process(config: Config, scontrol: Path, v: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ACT, config.warehouse.path, str(scontrol), json.dumps(v)])


def test_two_processes_acting_at_once_share_one_hourly_budget(tmp_path):
    scontrol, calls = stateful_scontrol(tmp_path, ["node1", "node2"], drain_sleep_s=3.0)
    config = config_for(tmp_path, scontrol, max_nodes_per_hour=1)
    the_scheduler_lists(config, "ci/42/0", ["node1"])
    the_scheduler_lists(config, "ci/43/0", ["node2"])
    both = [act_in_a_process(config, scontrol, verdict()),
            act_in_a_process(config, scontrol, verdict(attempt_id="ci/43/0", culprit_nodes=["node2"]))]
    assert [p.wait(120) for p in both] == [0, 0]
    assert len(drains(calls)) == 1
    assert sorted((r["status"], r["reason"] if r["status"] == "skipped" else "") for r in list_actions(config.warehouse.path)) == [
        ("done", ""), ("skipped", "max_nodes_per_hour")]


def test_a_process_killed_between_the_drain_and_its_row_leaves_it_planned_and_the_next_run_finishes_it(tmp_path):
    scontrol, calls = stateful_scontrol(tmp_path, ["node1", "node2"], kill_caller=True)
    config = config_for(tmp_path, scontrol, max_nodes_per_hour=5)
    the_scheduler_lists(config, "ci/42/0", ["node1"])
    assert act_in_a_process(config, scontrol, verdict()).wait(120) == -9
    [planned] = list_actions(config.warehouse.path)
    assert (planned["node"], planned["status"]) == ("node1", "planned")
    with pytest.raises(Exception, match="planned: its call has not finished"):
        resume(config, 1)
    scontrol, calls = stateful_scontrol(tmp_path, ["node1", "node2"])  # the restart: same cluster state, no kill
    [again] = apply_actions(config, [verdict()], "slurm")  # the killed run's job, attributed again
    assert (again.status, again.reason) == ("skipped", "already drained by firstfault")
    rows = list_actions(config.warehouse.path)
    assert [(r["action_id"], r["status"]) for r in rows] == [(1, "done"), (2, "skipped")]
    assert len(drains(calls)) == 1  # the drain the killed run made; none since
    resume(config, 1)


def test_a_planned_row_whose_call_was_never_made_is_made_by_the_next_run(tmp_path):
    scontrol, calls = stateful_scontrol(tmp_path, ["node1", "node2"])
    config = config_for(tmp_path, scontrol)
    the_scheduler_lists(config, "ci/42/0", ["node1"])
    record(config.warehouse.path, [Decision("ci/42/0", "ci", "node1", "xid_root", "drain", "planned", "firstfault: x (ci/42/0)")],
           datetime(2026, 12, 1))
    apply_actions(config, [verdict(verdict="ambiguous")], "slurm")
    assert [argv[1:] for argv in drains(calls)] == [["NodeName=node1", "State=DRAIN", "Reason=firstfault: x (ci/42/0)"]]
    assert [r["status"] for r in list_actions(config.warehouse.path)] == ["done", "skipped"]


def test_a_kernel_log_of_another_node_whose_name_begins_with_the_culprits_is_not_the_culprits(tmp_path):
    from firstfault.connectors.static_context import load_static_context
    from firstfault.run import run_attempts
    from firstfault.warehouse.read import stored_verdicts

    (tmp_path / "app.log").write_text(f"step 1 loss 2.0\n{XID_FROM.format(host='gpu-node1')}\n"
                                      "RuntimeError: CUDA error: unspecified launch failure\n")
    (tmp_path / "kernel-gpu-node12.log").write_text("Nov 30 10:19:00 gpu-node12 kernel: [1.0] usb 1-1: new device\n")
    spec = tmp_path / "attempt.yaml"
    spec.write_text(json.dumps({"workload_id": "77", "cluster": "ci", "state": "FAILED", "start": "2026-11-30T10:00:00Z",
                                "end": "2026-11-30T10:30:00Z", "nodes": ["gpu-node12"],
                                "logs": [{"source": "applog", "path": str(tmp_path / "app.log")},
                                         {"source": "syslog", "path": str(tmp_path / "kernel-{node}.log")}]}))
    config = Config()
    config = replace(config, lake=replace(config.lake, root=str(tmp_path / "lake")),
                     warehouse=replace(config.warehouse, path=str(tmp_path / "wh.duckdb")))
    contexts = [load_static_context(str(spec))]
    run_attempts(contexts, config, flow="test")
    [v] = stored_verdicts(config.warehouse.path, [contexts[0].attempt_id])
    assert v["culprit_nodes"] == ["gpu-node1"]
    assert "no kernel log from culprit node gpu-node1" in v["quality"]["reasons"]
