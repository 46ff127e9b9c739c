"""Kubernetes pod-log connector (connectors/k8s_logs.py) against the fake API server: current and previous container
logs staged per pod and container, placed on the pod's node, gone pods reported missing, faults reported."""
import json
import logging
from pathlib import Path

import polars as pl
from fake_backends import Fault, PodLog, fake_backends, rfc3339_nano  # noqa: F401  (pytest fixture)

from firstfault.config import Config, KubernetesSettings, LandingSettings
from firstfault.connectors.base import Staging
from firstfault.connectors.k8s_logs import KubernetesLogsConnector, from_config
from firstfault.lake import Lake
from firstfault.connectors.static_context import context_from_dict
from firstfault.landing import land_attempt
from firstfault.transforms.extract import load_patterns

T_NS = 1_764_378_000_000_000_000  # 2025-11-29T01:00:00Z
POD_LOG = "/api/v1/namespaces/train/pods/"
XID_LINE = "[rank9]: RuntimeError: CUDA error: an illegal memory access was encountered"


def pods(*entries):
    return [{"namespace": "train", "name": name, "node": node, "containers": ["trainer"], "restarts": restarts}
            for name, node, restarts in entries]


def make_ctx(root, pod_list):
    doc = {"workload_id": "w", "start": "2025-11-29T01:00:00Z", "end": "2025-11-29T02:00:00Z",
           "nodes": ["node-01", "node-02"], "scheduler": {"name": "kueue", "pods": pod_list}}
    return context_from_dict(doc, str(root / "attempt.yaml"), str(root))


def settings(url, **extra):
    return KubernetesSettings(**{"url": url, "timeout_s": 2.0, "retries": 1, "backoff_s": 0.01, **extra})


def stage(tmp_path, url, pod_list, **extra):
    ctx = make_ctx(tmp_path, pod_list)
    staging = Staging(Lake(str(tmp_path / "lake")), ctx)
    return KubernetesLogsConnector(settings(url, **extra)).stage(ctx, staging), staging, ctx


def test_current_and_previous_logs_are_staged_per_pod_and_container(fake_backends, tmp_path):  # noqa: F811
    fake_backends.pod_logs[("train", "w-0", "trainer", False)] = PodLog([(T_NS + 5, "step=1 loss=2.3"), (T_NS + 1_500_000_000, "step=2 loss=2.2")])
    fake_backends.pod_logs[("train", "w-1", "trainer", False)] = PodLog([(T_NS + 7, "restarted")])
    fake_backends.pod_logs[("train", "w-1", "trainer", True)] = PodLog([(T_NS + 3, XID_LINE)])
    reports, staging, _ = stage(tmp_path, fake_backends.url, pods(("w-0", "node-01", {"trainer": 0}), ("w-1", "node-02", {"trainer": 2})))
    assert [(r.uri.split("/pods/")[1], r.status, r.rows) for r in reports] == [
        ("w-0/log?container=trainer", "ok", 2), ("w-1/log?container=trainer", "ok", 1),
        ("w-1/log?container=trainer&previous=true", "ok", 1)]
    params = [r["params"] for r in fake_backends.requests_to(POD_LOG)]
    assert all(p["timestamps"] == "true" and p["container"] == "trainer" for p in params)
    assert [p.get("previous") for p in params] == [None, None, "true"]
    files = {s.path.split("/kubernetes_logs/")[1]: s for s in staging.logs}
    assert sorted(files) == ["train/w-0/trainer/node-01.log", "train/w-1/trainer/node-02.log", "train/w-1/trainer/node-02.previous.log"]
    assert {s.source for s in staging.logs} == {"applog"}
    previous = files["train/w-1/trainer/node-02.previous.log"]
    assert Path(previous.path.removeprefix("file://")).read_text() == f"{rfc3339_nano(T_NS + 3)} {XID_LINE}\n"
    assert json.loads(previous.origin) == {"connector": "kubernetes_logs", "url": fake_backends.url, "namespace": "train",
                                           "pod": "w-1", "container": "trainer", "previous": True}


def test_gone_pod_is_missing_and_other_pods_still_land(fake_backends, tmp_path):  # noqa: F811
    fake_backends.pod_logs[("train", "w-0", "trainer", False)] = PodLog([(T_NS + 5, "alive")])
    reports, staging, _ = stage(tmp_path, fake_backends.url, pods(("w-0", "node-01", {}), ("gone", "node-02", {})))
    assert [(r.status, r.rows) for r in reports] == [("ok", 1), ("missing", 0)]
    assert "HTTP 404" in reports[1].reason and 'pods \\"gone\\" not found' in reports[1].reason
    assert len(staging.logs) == 1  # nothing staged for the gone pod


def test_server_error_retried_unauthorized_not_and_token_secret(fake_backends, tmp_path, caplog):  # noqa: F811
    token_file = tmp_path / "token"
    token_file.write_text("sa-token-abcdef\n")
    fake_backends.pod_logs[("train", "w-0", "trainer", False)] = PodLog([(T_NS + 5, "alive")])
    fake_backends.faults.append(Fault(POD_LOG + "w-0", status=500, times=1))
    fake_backends.faults.append(Fault(POD_LOG + "w-1", status=401, times=None))
    caplog.set_level(logging.DEBUG, logger="firstfault")  # a CLI run earlier in this process set its own level
    reports, _, _ = stage(tmp_path, fake_backends.url, pods(("w-0", "node-01", {}), ("w-1", "node-02", {})),
                          token_file=str(token_file), retries=3)
    assert [r.status for r in reports] == ["ok", "error"] and "HTTP 401" in reports[1].reason
    assert len(fake_backends.requests_to(POD_LOG + "w-0")) == 2 and len(fake_backends.requests_to(POD_LOG + "w-1")) == 1
    assert {r["headers"]["Authorization"] for r in fake_backends.requests} == {"Bearer sa-token-abcdef"}
    assert "sa-token-abcdef" not in caplog.text and all("sa-token-abcdef" not in (r.reason or "") for r in reports)


def test_timeout_and_unreadable_token_become_error_reports(fake_backends, tmp_path):  # noqa: F811
    fake_backends.faults.append(Fault(POD_LOG, delay_s=1.0, times=None))
    reports, _, _ = stage(tmp_path, fake_backends.url, pods(("w-0", "node-01", {})), timeout_s=0.2)
    assert [r.status for r in reports] == ["error"] and "timed out" in reports[0].reason
    reports, _, _ = stage(tmp_path, fake_backends.url, pods(("w-0", "node-01", {"trainer": 1})), token_file=str(tmp_path / "none"))
    assert [r.status for r in reports] == ["error", "error"] and "token_file" in reports[0].reason


def test_applies_only_with_pods_and_malformed_entries_are_reported(fake_backends, tmp_path):  # noqa: F811
    connector = KubernetesLogsConnector(settings(fake_backends.url))
    assert not connector.applies(make_ctx(tmp_path, []))
    reports, staging, _ = stage(tmp_path, fake_backends.url, [{"namespace": "train", "name": "w-0", "containers": ["c"]}, "junk"])
    assert [(r.status, r.reason) for r in reports] == [("error", "scheduler.pods[0]: node must be a non-empty string"),
                                                       ("error", "scheduler.pods[1]: must be a mapping")]
    assert staging.logs == [] and fake_backends.requests == []


def test_from_config_follows_the_kubernetes_url():
    assert from_config(Config()) is None
    assert isinstance(from_config(Config(kubernetes=KubernetesSettings(url="https://api:6443"))), KubernetesLogsConnector)


def test_landed_lines_are_placed_on_the_pod_node_with_locators(fake_backends, tmp_path):  # noqa: F811
    fake_backends.pod_logs[("train", "w-1", "trainer", False)] = PodLog([(T_NS + 1_000, "restarted")])
    fake_backends.pod_logs[("train", "w-1", "trainer", True)] = PodLog([(T_NS + 120_000_000_123, XID_LINE)])
    ctx = make_ctx(tmp_path, pods(("w-1", "node-02", {"trainer": 1})))
    lake = Lake(str(tmp_path / "lake"))
    result = land_attempt(ctx, lake, load_patterns(), LandingSettings(), [KubernetesLogsConnector(settings(fake_backends.url))])
    assert [(r["connector"], r["status"]) for r in result.reports if r["connector"] == "kubernetes_logs"] == [("kubernetes_logs", "ok")] * 2
    logs = pl.from_arrow(lake.read("logs", ctx.day, ctx.attempt_key))
    assert set(logs["node"]) == {"node-02"} and set(logs["ts_quality"]) == {"exact"}
    events = pl.from_arrow(lake.read("events", ctx.day, ctx.attempt_key)).filter(pl.col("raw").str.contains("illegal memory"))
    assert events.height >= 1 and set(events["node"]) == {"node-02"}
    locator = json.loads(events["locator"][0])
    assert locator["ts_ns"] == T_NS + 120_000_000_123 and locator["origin"]["previous"] is True
