"""Loki source connector (connectors/loki.py) against the fake Loki: paging, node matcher, staged files, faults,
secrets, and the headline case attributed from Loki streams alone or from local files while Loki is down."""
import json
import logging
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fake_backends import Fault, MemoryStream, fake_backends  # noqa: F401  (pytest fixture)

from firstfault.cli import main
from firstfault.config import Config, LokiSettings, load_config
from firstfault.connectors.base import Staging
from firstfault.lake import Lake
from firstfault.connectors.loki import LokiConnector, from_config, with_node_matcher
from firstfault.connectors.registry import source_connectors
from firstfault.connectors.static_context import context_from_dict
from firstfault.synthetic.demo import SCENARIOS
from firstfault.errors import BadInput

LOKI = "/loki/api/v1/query_range"
START_NS = 1_764_378_000_000_000_000  # 2025-11-29T01:00:00Z, the context's start
NS_PER_S = 1_000_000_000


def make_ctx(root, nodes=("node-01", "node-02")):
    doc = {"workload_id": "w", "start": "2025-11-29T01:00:00Z", "end": "2025-11-29T02:00:00Z", "nodes": list(nodes)}
    return context_from_dict(doc, str(root / "attempt.yaml"), str(root))


def loki_settings(url, **extra):
    return LokiSettings(**{"url": url, "streams": {"syslog": '{job="syslog"}'}, "timeout_s": 2.0, "retries": 1,
                           "backoff_s": 0.01, "lookback_s": 0.0, "grace_s": 0.0, **extra})


def stage(tmp_path, settings, ctx=None):
    ctx = ctx or make_ctx(tmp_path)
    staging = Staging(Lake(str(tmp_path / "lake")), ctx)
    return LokiConnector(settings).stage(ctx, staging), staging


def staged_text(spec) -> list[str]:
    return Path(spec.path.removeprefix("file://")).read_text(encoding="utf-8").splitlines()


def stamp(ns: int) -> str:
    seconds, frac = divmod(ns, NS_PER_S)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def test_pages_across_shared_timestamps_without_loss_or_duplicates(fake_backends, tmp_path):  # noqa: F811
    a = [(START_NS + t, f"a{i}") for i, t in enumerate((10, 20, 20, 30, 30, 40))]
    b = [(START_NS + t, f"b{i}") for i, t in enumerate((20, 30, 50))]
    fake_backends.streams += [MemoryStream({"job": "syslog", "host": "node-01"}, a),
                              MemoryStream({"job": "syslog", "host": "node-02"}, b)]
    reports, staging = stage(tmp_path, loki_settings(fake_backends.url, limit=4))
    starts = [int(r["params"]["start"]) - START_NS for r in fake_backends.requests_to(LOKI)]
    assert starts == [0, 20, 30, 40]  # each page starts at the last timestamp of the one before
    by_node = {json.loads(s.origin)["stream"]["host"]: staged_text(s) for s in staging.logs}
    assert by_node == {"node-01": [f"{stamp(ts)} {line}" for ts, line in a], "node-02": [f"{stamp(ts)} {line}" for ts, line in b]}
    assert sorted((r.status, r.rows, r.reason) for r in reports) == [("ok", 3, None), ("ok", 6, None)]


def test_query_narrows_the_selector_to_the_attempt_nodes(fake_backends, tmp_path):  # noqa: F811
    for host in ("node-01", "node-010", "gpu.a", "gpuxa"):
        fake_backends.streams.append(MemoryStream({"job": "syslog", "host": host}, [(START_NS + 5, f"from {host}")]))
    fake_backends.streams.append(MemoryStream({"job": "other", "host": "node-01"}, [(START_NS + 5, "other job")]))
    reports, staging = stage(tmp_path, loki_settings(fake_backends.url, org_id="team-a"), make_ctx(tmp_path, ("node-01", "gpu.a")))
    request = fake_backends.requests_to(LOKI)[0]
    assert request["params"]["query"] == r'{job="syslog", host=~"gpu\\.a|node-01"}'
    assert request["params"]["direction"] == "forward" and request["params"]["limit"] == "5000"
    assert request["headers"]["X-Scope-OrgID"] == "team-a"
    assert sorted(line for s in staging.logs for line in staged_text(s)) == [f"{stamp(START_NS + 5)} from gpu.a", f"{stamp(START_NS + 5)} from node-01"]
    names = sorted(Path(s.path).name.split(".")[0] for s in staging.logs)
    assert names == ["gpu", "node-01"]  # the node leads the file name; dots kept, as in host names
    assert {r.status for r in reports} == {"ok"} and all("loki/api/v1/query_range?query={" in r.uri for r in reports)


def test_window_and_node_matcher_escaping(tmp_path):
    assert with_node_matcher('{job="a}b"} |= "x"', "host", ["n-1"]) == '{job="a}b", host=~"n-1"} |= "x"'
    assert with_node_matcher("{ }", "node", ["a+b"]) == r'{node=~"a\\+b"}'
    start, end = LokiConnector(loki_settings("http://x", lookback_s=60.0, grace_s=1.5)).window(make_ctx(tmp_path))
    assert (start, end) == (START_NS - 60 * NS_PER_S, START_NS + 3600 * NS_PER_S + 1_500_000_000)


def test_multiline_entry_keeps_its_stamp_on_every_line(fake_backends, tmp_path):  # noqa: F811
    fake_backends.streams.append(MemoryStream({"job": "syslog", "host": "node-01"}, [(START_NS + 7, "Traceback:\n  File x\nError\n")]))
    _, staging = stage(tmp_path, loki_settings(fake_backends.url))
    assert staged_text(staging.logs[0]) == [f"{stamp(START_NS + 7)} {line}" for line in ("Traceback:", "  File x", "Error")]


def test_a_page_full_of_one_timestamp_moves_on_and_says_so(fake_backends, tmp_path):  # noqa: F811
    same = [(START_NS + 1, f"x{i}") for i in range(5)] + [(START_NS + 2, "after")]
    fake_backends.streams.append(MemoryStream({"job": "syslog", "host": "node-01"}, same))
    reports, staging = stage(tmp_path, loki_settings(fake_backends.url, limit=3))
    assert staged_text(staging.logs[0])[-1].endswith(" after") and len(staged_text(staging.logs[0])) == 4
    assert reports[0].status == "ok" and "fill a whole page" in reports[0].reason


def test_empty_window_is_reported_empty(fake_backends, tmp_path):  # noqa: F811
    reports, staging = stage(tmp_path, loki_settings(fake_backends.url))
    assert [(r.status, r.rows) for r in reports] == [("empty", 0)] and "no entries between" in reports[0].reason
    assert staging.logs == []


def test_server_error_is_retried_and_nothing_is_lost(fake_backends, tmp_path):  # noqa: F811
    fake_backends.streams.append(MemoryStream({"job": "syslog", "host": "node-01"}, [(START_NS + i, f"l{i}") for i in range(10)]))
    fake_backends.faults.append(Fault(LOKI, status=500, times=1))
    reports, staging = stage(tmp_path, loki_settings(fake_backends.url, limit=4))
    assert [(r.status, r.rows) for r in reports] == [("ok", 10)]
    assert len(staged_text(staging.logs[0])) == 10 and len(fake_backends.requests_to(LOKI)) == 5  # 4 pages + 1 retry


def test_unauthorized_is_not_retried_and_the_token_stays_secret(fake_backends, tmp_path, monkeypatch, caplog):  # noqa: F811
    monkeypatch.setenv("LOKI_TOKEN", "tok-0123456789")
    fake_backends.faults.append(Fault(LOKI, status=401, times=None))
    caplog.set_level(logging.DEBUG, logger="firstfault")  # a CLI run earlier in this process set its own level
    reports, _ = stage(tmp_path, loki_settings(fake_backends.url, token_env="LOKI_TOKEN", retries=3))
    assert len(fake_backends.requests_to(LOKI)) == 1
    assert fake_backends.requests[0]["headers"]["Authorization"] == "Bearer tok-0123456789"
    assert [(r.status, r.source) for r in reports] == [("error", "syslog")] and "HTTP 401" in reports[0].reason
    assert "tok-0123456789" not in caplog.text and "tok-0123456789" not in reports[0].reason


def test_timeout_becomes_an_error_report(fake_backends, tmp_path):  # noqa: F811
    fake_backends.faults.append(Fault(LOKI, delay_s=1.0, times=None))
    reports, _ = stage(tmp_path, loki_settings(fake_backends.url, timeout_s=0.2))
    assert [(r.connector, r.status) for r in reports] == [("loki", "error")] and "timed out" in reports[0].reason


def test_backend_down_is_not_waited_out_for_every_source(fake_backends, tmp_path):  # noqa: F811
    fake_backends.faults.append(Fault(LOKI, status=503, times=None))
    streams = {"applog": '{job="training"}', "syslog": '{job="syslog"}'}
    reports, _ = stage(tmp_path, loki_settings(fake_backends.url, streams=streams, retries=2))
    assert [(r.source, r.status) for r in reports] == [("applog", "error"), ("syslog", "error")]
    assert "HTTP 503" in reports[0].reason and reports[1].reason.startswith("not queried: ") and "HTTP 503" in reports[1].reason
    assert len(fake_backends.requests_to(LOKI)) == 3  # the first source's tries only


def test_failure_after_some_pages_keeps_them_and_reports_the_error(fake_backends, tmp_path):  # noqa: F811
    fake_backends.streams.append(MemoryStream({"job": "syslog", "host": "node-01"}, [(START_NS + i, f"l{i}") for i in range(10)]))
    fake_backends.faults += [Fault(LOKI, times=1),  # the first page is answered normally ...
                             Fault(LOKI, status=502, times=None)]  # ... then the backend goes away
    reports, staging = stage(tmp_path, loki_settings(fake_backends.url, limit=4, retries=0))
    assert [(r.status, r.rows) for r in reports] == [("error", 4)] and "(after 4 entries)" in reports[0].reason
    assert len(staged_text(staging.logs[0])) == 4


def test_from_config_and_registry(tmp_path):
    assert from_config(Config()) is None
    toml = tmp_path / "firstfault.toml"
    toml.write_text('[loki]\nurl = "http://loki:3100"\nnode_label = "instance"\n[loki.streams]\nsyslog = \'{job="syslog"}\'\n')
    config = load_config(str(toml))
    assert config.loki.streams == {"syslog": '{job="syslog"}'} and config.loki.node_label == "instance"
    names = [c.name for c in source_connectors(config)]
    assert "loki" in names and "kubernetes_logs" not in names  # [kubernetes] url is empty
    toml.write_text('[loki]\nurl = "http://loki:3100"\n')
    with pytest.raises(BadInput, match="loki.streams"):
        from_config(load_config(str(toml)))
    toml.write_text('[loki]\nurl = "http://loki:3100"\nstreams = {syslog = "job=syslog"}\n')
    with pytest.raises(BadInput, match="stream selector"):
        from_config(load_config(str(toml)))


# --- end to end: the headline case ---------------------------------------------------------------

def headline_streams():
    """The demo's headline attempt as Loki would hold it: each node's training output (`job="training"`, without
    srun's `N: ` label, as a per-node collector ships it) and kernel log (`job="syslog"`). Stamps are the lines'
    times plus 789 ns, so the locator must carry Loki's value, not a microsecond rounding of it."""
    scenario = SCENARIOS[0]()
    assert scenario.name == "headline"

    def ns(t):
        return int(t.timestamp()) * NS_PER_S + t.microsecond * 1000 + 789

    app, kern = {}, {}
    for t, line in scenario.app:
        label, text = line.split(": ", 1)
        app.setdefault(scenario.node_of(int(label)), []).append((ns(t), text))
    for node in scenario.nodes:
        kern[node] = [(ns(t), f"{t:%b %d %H:%M:%S} {node} kernel: {text.removeprefix('kernel: ')}") for t, text in scenario.kernel.get(node, [])]
        kern[node].append((ns(scenario.start), f"{scenario.start:%b %d %H:%M:%S} {node} systemd[1]: Started Session 4 of user slurm."))
    streams = [MemoryStream({"job": "training", "host": n}, v) for n, v in app.items()]
    streams += [MemoryStream({"job": "syslog", "host": n, "filename": "/var/log/kern.log"}, v) for n, v in kern.items()]
    streams.append(MemoryStream({"job": "syslog", "host": "node-99"}, [(ns(scenario.start), "another job's node")]))
    return scenario, streams


def write_config(tmp_path, url, **loki):
    # limit 30: the applog takes two pages, and no page is filled by the 27 NCCL init lines that share one stamp
    lines = [f'url = "{url}"', "limit = 30", "backoff_s = 0.01", "retries = 1"] + [f"{k} = {v}" for k, v in loki.items()]
    path = tmp_path / "firstfault.toml"
    path.write_text("[loki]\n" + "\n".join(lines) + "\n[loki.streams]\nsyslog = '{job=\"syslog\"}'\napplog = '{job=\"training\"}'\n")
    return path


def attribute(capsys, tmp_path, spec, config):
    assert main(["attribute", "--static", str(spec), "--json", "--config", str(config),
                 "--warehouse", str(tmp_path / "wh.duckdb"), "--lake", str(tmp_path / "lake")]) == 0
    return json.loads(capsys.readouterr().out)


def test_headline_from_loki_streams(fake_backends, tmp_path, capsys):  # noqa: F811
    scenario, streams = headline_streams()
    fake_backends.streams += streams
    spec = tmp_path / "attempt.yaml"
    spec.write_text(json.dumps({"workload_id": "headline-loki", "cluster": "demo", "state": "FAILED", "exit_code": "1:0",
                                "start": f"{scenario.start:%Y-%m-%dT%H:%M:%SZ}", "end": f"{scenario.end:%Y-%m-%dT%H:%M:%SZ}",
                                "gpu_model": "H100", "nodes": scenario.nodes}))
    v = attribute(capsys, tmp_path, spec, write_config(tmp_path, fake_backends.url))
    assert (v["verdict"], v["domain"], v["subdomain"], v["culprit_nodes"]) == ("attributed", "hardware", "gpu_nvlink", ["node-02"])
    assert {s["node"] for s in v["symptoms"] if s["event"].startswith("nccl")} == {"node-01", "node-02", "node-03"}
    root = [e for e in v["evidence"] if e["role"] == "root_cause"]
    assert len(root) == 1 and "NVRM: Xid (PCI:0000:3b:00): 149" in root[0]["text"]
    xid = next((ts, line) for s in streams if s.labels.get("host") == "node-02" and s.labels["job"] == "syslog"
               for ts, line in s.values if "149, NETIR" in line)
    assert root[0]["locator"] == {"origin": {"connector": "loki", "url": fake_backends.url,
                                             "stream": {"filename": "/var/log/kern.log", "host": "node-02", "job": "syslog"}},
                                  "ts_ns": xid[0]}
    nccl = [e for e in v["evidence"] if e["role"] == "symptom" and "NCCL WARN" in e["text"]]
    assert len(nccl) >= 3
    for e in nccl:
        host = e["locator"]["origin"]["stream"]["host"]
        stream = next(s for s in streams if s.labels == {"job": "training", "host": host})
        assert (e["locator"]["ts_ns"], e["text"].split(" ", 1)[1]) in stream.values
    loki = [r for r in v["connector_reports"] if r["connector"] == "loki"]
    assert {r["status"] for r in loki} == {"ok"} and len(loki) == 6  # 3 nodes x (syslog, applog); node-99 not asked
    assert sum(r["rows"] for r in loki) == sum(len(s.values) for s in streams) - 1
    assert len([r for r in fake_backends.requests_to(LOKI) if "training" in r["params"]["query"]]) == 2


@pytest.mark.parametrize("fault", [Fault(LOKI, status=503, times=None), Fault(LOKI, delay_s=1.0, times=None)], ids=["503", "timeout"])
def test_loki_down_local_files_still_decide(fake_backends, tmp_path, capsys, demo_dir, fault):  # noqa: F811
    fake_backends.faults.append(fault)
    headline = tmp_path / "headline"
    shutil.copytree(demo_dir / "attempts" / "headline", headline)
    v = attribute(capsys, tmp_path, headline / "attempt.yaml", write_config(tmp_path, fake_backends.url, timeout_s=0.2))
    assert (v["verdict"], v["domain"], v["subdomain"], v["culprit_nodes"]) == ("attributed", "hardware", "gpu_nvlink", ["node-02"])
    loki = [r for r in v["connector_reports"] if r["connector"] == "loki"]
    assert sorted(r["source"] for r in loki) == ["applog", "syslog"] and {r["status"] for r in loki} == {"error"}
    assert all(("HTTP 503" if fault.status else "timed out") in r["reason"] for r in loki)
    assert any(r["connector"] == "local_files" and r["status"] == "ok" for r in v["connector_reports"])
