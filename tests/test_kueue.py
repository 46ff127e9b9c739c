"""Kueue workloads as attempts (connectors/kueue.py), their Kubernetes status as evidence (connectors/k8s_status.py),
from captured documents and from a fake API server serving the same documents."""
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fake_kube import FakeKube
from firstfault.cli import main
from firstfault.config import Config, KubernetesSettings, KueueSettings
from firstfault.connectors.kueue import DocumentFolder, KubernetesApi, KueueConnector, parse_documents, workload_attempts
from firstfault.errors import BadInput

FIXTURES = Path(__file__).parent / "fixtures" / "kueue"
REF = "ml/jobset-llama-7b-5c2f1"
GPU_LABEL = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def documents_connector(folder=FIXTURES) -> KueueConnector:
    return KueueConnector(KueueSettings(documents=str(folder), cluster="k8s"), DocumentFolder(str(folder)), GPU_LABEL)


def api_connector(url: str) -> KueueConnector:
    return KueueConnector(KueueSettings(cluster="k8s"), KubernetesApi(KubernetesSettings(url=url, retries=0)), GPU_LABEL)


def test_an_evicted_then_readmitted_workload_is_two_attempts():
    first, second = documents_connector().resolve(REF)
    assert (first.attempt_id, second.attempt_id) == ("k8s/ml.jobset-llama-7b-5c2f1/0", "k8s/ml.jobset-llama-7b-5c2f1/1")
    assert first.nodes == ("gpu-node-01", "gpu-node-02") and first.state == "PREEMPTED"
    # the snapshot taken while it waited recorded the eviction; its admission time is known only from its pods
    assert (first.start, first.end) == (utc("2026-11-28T08:00:06Z"), utc("2026-11-28T09:30:00Z"))
    assert first.scheduler["workload"]["preemption"] == "InClusterQueue"
    # nodes in pod-index order, so the default node-major rank map matches the pods' node ranks
    assert second.nodes == ("gpu-node-03", "gpu-node-02") and second.state == "OUT_OF_MEMORY" and second.exit_code == "137"
    assert (second.start, second.end) == (utc("2026-11-28T10:15:00Z"), utc("2026-11-28T11:42:13Z"))
    assert {c.gpu_model for c in (first, second)} == {H100} and {c.gpus_per_node for c in (first, second)} == {8}


def test_pod_records_keep_the_keys_the_pod_log_connector_reads():
    second = documents_connector().resolve(REF)[1]
    oom = second.scheduler["pods"][0]
    assert set(oom) == {"namespace", "name", "node", "containers", "restarts", "terminations"}
    assert (oom["namespace"], oom["name"], oom["node"], oom["containers"], oom["restarts"]) == (
        "ml", "llama-7b-workers-0-0-r8t3v", "gpu-node-03", ["trainer"], {"trainer": 0})
    assert oom["terminations"] == [{"container": "trainer", "reason": "OOMKilled", "exit_code": 137, "signal": 9,
                                    "started_at": "2026-11-28T10:15:40Z", "finished_at": "2026-11-28T11:42:10Z"}]
    assert second.scheduler["name"] == "kueue" and second.scheduler["ref"] == REF


def test_discover_returns_the_attempts_that_ended_in_the_window():
    connector = documents_connector()
    day = utc("2026-11-28T00:00:00Z")
    assert [c.attempt for c in connector.discover(day, utc("2026-11-29T00:00:00Z"))] == [0, 1]
    assert [c.attempt for c in connector.discover(utc("2026-11-28T10:00:00Z"), utc("2026-11-29T00:00:00Z"))] == [1]
    assert connector.discover(utc("2026-11-29T00:00:00Z"), utc("2026-11-30T00:00:00Z")) == []


def test_api_mode_reads_the_same_objects(monkeypatch):
    monkeypatch.setattr(KubernetesApi, "PAGE", 1)  # every list comes in pages: the continue token is followed
    with FakeKube(FIXTURES) as kube:
        first, second = api_connector(kube.url).resolve(REF)
    assert any("continue=" in r for r in kube.requests)
    # the API has only the latest Workload: the first admission is known from "Previously: ..." and its pods
    assert first.state == "PREEMPTED" and first.nodes == ("gpu-node-01", "gpu-node-02")
    assert (first.start, first.end) == (utc("2026-11-28T08:00:06Z"), utc("2026-11-28T09:30:32Z"))
    assert second.state == "OUT_OF_MEMORY" and second.nodes == ("gpu-node-03", "gpu-node-02") and second.gpu_model == H100
    assert second.scheduler["pods"] == documents_connector().resolve(REF)[1].scheduler["pods"]


def test_gpu_model_falls_back_to_the_node_selector_and_jobset_restarts_are_attempts(tmp_path):
    objects = [o for o in documents_connector().source.objects if o.kind != "Node"]
    pods = [o for o in objects if o.kind == "Pod" and o.body["metadata"]["creationTimestamp"].startswith("2026-11-28T10")]
    restarted = json.loads(json.dumps(pods[0].body))
    restarted["kind"] = "Pod"
    restarted["metadata"].update(name="llama-7b-workers-0-0-zz9zz", creationTimestamp="2026-11-28T11:42:11Z")
    restarted["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1"
    restarted["spec"]["nodeName"] = "gpu-node-04"
    restarted["status"]["containerStatuses"][0]["state"]["terminated"].update(
        reason="Error", exitCode=1, startedAt="2026-11-28T11:42:12Z", finishedAt="2026-11-28T11:42:13Z")
    objects += parse_documents(json.dumps(restarted), "restarted.json")
    attempts = workload_attempts(objects, "ml", "jobset-llama-7b-5c2f1", cluster="k8s", gpu_label=GPU_LABEL)
    assert [(c.attempt, c.nodes, c.state) for c in attempts] == [
        (0, ("gpu-node-01", "gpu-node-02"), "PREEMPTED"),
        (1, ("gpu-node-03", "gpu-node-02"), "OUT_OF_MEMORY"),  # the JobSet restarted it after the OOM
        (2, ("gpu-node-04",), "FAILED"),
    ]
    assert {c.gpu_model for c in attempts} == {H100}  # from the pods' nodeSelector: no Node documents


def write_config(tmp_path: Path, body: str) -> str:
    path = tmp_path / "firstfault.toml"
    path.write_text(body, encoding="utf-8")
    return str(path)


def attribute(tmp_path, capsys, config: str, ref: str = REF) -> tuple[int, list[dict], str]:
    code = main(["attribute", "--kueue", ref, "--json", "--config", config,
                 "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "wh.duckdb"), "--prefect", "never"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def check_verdicts(verdicts: list[dict]) -> None:
    by_attempt = {v["attempt"]: v for v in verdicts}
    preempted, oom = by_attempt[0], by_attempt[1]
    assert (preempted["verdict"], preempted["domain"], preempted["subdomain"]) == ("attributed", "infrastructure", "preemption")
    assert preempted["state"] == "PREEMPTED" and preempted["action"] == "restart"
    # the Workload's eviction is the evidence line, not only the scheduler state; the SIGTERM exits are its cascade
    evicted = [e for e in preempted["evidence"] if e["role"] == "root_cause"]
    assert len(evicted) == 1 and "evicted reason=Preempted" in evicted[0]["text"]  # the API's copy lacks the preemption path
    assert evicted[0]["locator"]["origin"] == {"connector": "kubernetes_status", "object": "workload/ml/jobset-llama-7b-5c2f1"}
    assert {e["role"] for e in preempted["evidence"]} == {"root_cause", "symptom"}
    assert (oom["verdict"], oom["domain"], oom["subdomain"], oom["culprit_nodes"]) == (
        "attributed", "application", "host_oom", ["gpu-node-03"])
    assert oom["action"] == "stop"
    root = [e for e in oom["evidence"] if e["role"] == "root_cause"]
    assert len(root) == 1 and root[0]["source"] == "scheduler"
    assert "gpu-node-03 container trainer terminated reason=OOMKilled exit_code=137" in root[0]["text"]
    assert root[0]["locator"]["origin"] == {"connector": "kubernetes_status", "object": "pod/ml/llama-7b-workers-0-0-r8t3v"}


def test_attribute_kueue_from_documents(tmp_path, capsys):
    config = write_config(tmp_path, f'[kueue]\ndocuments = "{FIXTURES}"\ncluster = "k8s"\n')
    code, verdicts, err = attribute(tmp_path, capsys, config)
    assert code == 0, err
    check_verdicts(verdicts)


def test_attribute_kueue_from_the_api(tmp_path, capsys):
    with FakeKube(FIXTURES, token="s3cret") as kube:
        config = write_config(tmp_path, f'[kubernetes]\nurl = "{kube.url}"\ntoken = "s3cret"\nretries = 0\n'
                                        f'[kueue]\ncluster = "k8s"\n')
        code, verdicts, err = attribute(tmp_path, capsys, config)
    assert code == 0, err
    check_verdicts(verdicts)
    assert "s3cret" not in err


def test_unknown_workload_and_bad_refs_exit_2(tmp_path, capsys):
    config = write_config(tmp_path, f'[kueue]\ndocuments = "{FIXTURES}"\n')
    for ref, words in (("ml/no-such-workload", ("no Workload ml/no-such-workload", str(FIXTURES))),
                       ("no-namespace", ("NAMESPACE/WORKLOAD", "no-namespace"))):
        code, verdicts, err = attribute(tmp_path, capsys, config, ref)
        assert code == 2 and not verdicts and len(err.strip().splitlines()) == 1
        assert all(w in err for w in words), err


@pytest.mark.parametrize(("file", "edit", "field"), [
    ("pods.json", lambda d: d["items"][1]["metadata"].update(creationTimestamp="yesterday"), "items[1].metadata.creationTimestamp"),
    ("workload.json", lambda d: d["status"]["conditions"][6].update(lastTransitionTime="11:42"), "status.conditions[6].lastTransitionTime"),
    ("jobs.json", lambda d: d["items"][0].pop("metadata"), "items[0].metadata"),
    ("pods-first-admission.json", lambda d: d["items"][0]["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode="x"),
     "items[0].status.containerStatuses[0].state.terminated.exitCode"),
])
def test_malformed_documents_exit_2_naming_file_and_field(tmp_path, capsys, file, edit, field):
    folder = tmp_path / "documents"
    shutil.copytree(FIXTURES, folder)
    document = json.loads((folder / file).read_text())
    edit(document)
    (folder / file).write_text(json.dumps(document))
    code, _, err = attribute(tmp_path, capsys, write_config(tmp_path, f'[kueue]\ndocuments = "{folder}"\n'))
    assert code == 2 and str(folder / file) in err and f"'{field}'" in err, err


def test_documents_that_are_not_json_exit_2(tmp_path, capsys):
    folder = tmp_path / "documents"
    shutil.copytree(FIXTURES, folder)
    (folder / "nodes.json").write_text('{"kind": "NodeList", "items": [')
    code, _, err = attribute(tmp_path, capsys, write_config(tmp_path, f'[kueue]\ndocuments = "{folder}"\n'))
    assert code == 2 and str(folder / "nodes.json") in err and "not valid JSON" in err


def test_kueue_is_off_without_documents_or_url():
    from firstfault.connectors.kueue import from_config

    assert from_config(Config()) is None
    with pytest.raises(BadInput, match="kueue.documents"):
        from_config(Config(kueue=KueueSettings(documents="/nonexistent/kueue"))).resolve(REF)
