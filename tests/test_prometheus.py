"""The Prometheus source connector against a real Prometheus (Debian package `prometheus`): the test writes an
OpenMetrics history, backfills it with `promtool tsdb create-blocks-from openmetrics`, starts the server on a free
loopback port over that data and lets the connector and `firstfault attribute` read it."""
import json
import shutil
import socket
import subprocess
import time
import urllib.request
from itertools import pairwise
from pathlib import Path

import httpx
import polars as pl
import pytest
import yaml

from firstfault.cli import main
from firstfault.config import Config, PrometheusSettings, load_config
from firstfault.connectors.base import Staging
from firstfault.lake import Lake
from firstfault.connectors.prometheus import (
    MAX_POINTS, expand_nodes, from_config, gpu_label, port_label, query_ranges, query_window,
)
from firstfault.connectors.static_context import context_from_dict
from firstfault.errors import BadInput

STEP = 15
# Yesterday on a 2 h boundary (one TSDB block), far from the head block a server would be ingesting into.
T0 = (int(time.time()) - 86400) // 7200 * 7200
SAMPLES = [T0 + i * STEP for i in range(480)]  # 2 h of 15 s samples
FLAP = T0 + 3600                               # node-02 mlx5_0 goes down once here
NODES = ("node-01", "node-02", "node-03")
PCI = {0: "00000000:3B:00.0", 1: "00000000:5D:00.0"}


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def history() -> str:
    """OpenMetrics text: node_exporter InfiniBand counters (`instance` = host:9100) and dcgm-exporter gauges
    (`Hostname`, `instance` = the exporter pod's address). node-09 is not in the attempt: its port flaps too."""
    series = []
    for host in (*NODES, "node-09"):
        labels = {"device": "mlx5_0", "instance": f"{host}:9100", "job": "node", "port": "1"}
        downs = {"node-02": (3, 4), "node-09": (0, 5)}.get(host, (0, 0))
        series.append(("node_infiniband_link_downed_total", labels, [downs[t >= FLAP] for t in SAMPLES]))
        series.append(("node_infiniband_state_id", labels, [4] * len(SAMPLES)))
        for gpu in (0, 1):
            dcgm = {"Hostname": host, "UUID": f"GPU-{host}-{gpu}", "device": f"nvidia{gpu}", "gpu": str(gpu),
                    "instance": f"10.1.0.{gpu + 10}:9400", "job": "dcgm", "pci_bus_id": PCI[gpu]}
            series.append(("DCGM_FI_DEV_GPU_TEMP", dcgm, [40 + (i % 5) for i in range(len(SAMPLES))]))
            series.append(("DCGM_FI_DEV_XID_ERRORS", dcgm, [0] * len(SAMPLES)))
    lines, typed = [], set()
    for name, labels, values in sorted(series, key=lambda s: s[0]):  # one family after the other
        family = name.removesuffix("_total")
        if family not in typed:
            lines.append(f"# TYPE {family} {'counter' if name.endswith('_total') else 'gauge'}")
            typed.add(family)
        selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines += [f"{name}{{{selector}}} {v} {t}" for t, v in zip(SAMPLES, values)]  # seconds, time order
    return "\n".join([*lines, "# EOF"]) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    missing = [exe for exe in ("prometheus", "promtool") if shutil.which(exe) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: install the Debian package `prometheus` "
                    "(apt-get install --no-install-recommends prometheus; .ci/run does)")
    work = tmp_path_factory.mktemp("prometheus")
    (work / "history.om").write_text(history())
    data = work / "data"
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"), str(data)],
                   check=True, capture_output=True, text=True)
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    log_path = work / "prometheus.log"
    with open(log_path, "wb") as log:
        for _ in range(3):  # the free port may be taken before prometheus binds it: start again on another
            url = f"http://127.0.0.1:{free_port()}"
            server = subprocess.Popen(
                ["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
                 # retention counts from the newest block; the default would not keep yesterday forever either
                 "--storage.tsdb.retention.time=10y", f"--web.listen-address={url.removeprefix('http://')}"],
                stdout=log, stderr=subprocess.STDOUT)
            if wait_ready(url, server):
                break
            stop(server)
        else:
            pytest.fail("prometheus did not become ready:\n" + log_path.read_text()[-2000:])
        try:
            yield url
        finally:
            stop(server)


def wait_ready(url: str, server: subprocess.Popen, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return True
        except OSError:  # refused until it listens, 503 while the TSDB opens
            time.sleep(0.05)
    return False


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def attempt_dir(tmp_path: Path) -> Path:
    """A static context with only a little application log: node-01 sees its IB peer fail 40 s after the flap."""
    root = tmp_path / "attempt"
    (root / "app").mkdir(parents=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(FLAP + 40))
    (root / "app" / "node-01.log").write_text(
        f"[{stamp}] node-01:11:12 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<5486> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n")
    (root / "attempt.yaml").write_text(
        f"workload_id: ib-flap\nstate: FAILED\nstart: '{iso(T0 + 1800)}'\nend: '{iso(T0 + 5400)}'\n"
        f"nodes: [{', '.join(NODES)}]\nlogs:\n  - {{source: applog, path: 'app/*.log'}}\n")
    return root


def context(root: Path):
    return context_from_dict(yaml.safe_load((root / "attempt.yaml").read_text()), str(root / "attempt.yaml"), str(root))


def connector(url: str, **settings):
    return from_config(Config(prometheus=PrometheusSettings(url=url, **settings)))


def write_config(path: Path, url: str, extra: str = "") -> Path:
    path.write_text(f'[prometheus]\nurl = "{url}"\n{extra}')
    return path


class CountingTransport(httpx.HTTPTransport):
    def __init__(self):
        super().__init__()
        self.queries: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.queries.append(request.url.params.get("query", ""))
        return super().handle_request(request)


def test_connector_stages_the_window_as_long_csv(prometheus_url, tmp_path):
    ctx = context(attempt_dir(tmp_path))
    staging = Staging(Lake(str(tmp_path / "lake")), ctx)
    reports = {r.reason.split(":")[0]: r for r in connector(prometheus_url).stage(ctx, staging)}
    assert staging.metrics and len(staging.metrics) == 1
    staged = pl.read_csv(staging.metrics[0].removeprefix("file://"), infer_schema=False)
    assert staged.columns == ["ts", "node", "metric", "value", "gpu", "port"]
    assert set(staged["node"]) == set(NODES)  # port stripped from `instance`, node-09 never asked for

    downed = staged.filter(pl.col("metric") == "node_infiniband_link_downed_total", pl.col("node") == "node-02")
    assert set(downed["port"]) == {"mlx5_0:1"} and downed["gpu"].null_count() == downed.height
    # the attempt's window with the 30 min lookback and 5 min grace, on the scrape grid
    assert (downed["ts"].min(), downed["ts"].max()) == (iso(T0), iso(T0 + 5700))
    assert downed.height == 5700 // STEP + 1
    flip = downed.filter(pl.col("value").cast(pl.Float64) == 4)["ts"].min()
    assert flip == iso(FLAP)

    temps = staged.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
    assert set(temps["gpu"]) == set(PCI.values()) and temps["port"].null_count() == temps.height
    assert set(temps["node"]) == set(NODES)  # from `Hostname`: the exporter's `instance` is a pod address

    assert reports["node_infiniband_link_downed_total"].status == "ok"
    assert reports["node_infiniband_link_downed_total"].rows == 3 * downed.height
    assert "3 series, step 15 s" in reports["node_infiniband_link_downed_total"].reason
    assert reports["DCGM_FI_DEV_GPU_TEMP"].status == "ok"  # matched by the `{__name__=~...}` form of the query
    assert reports["node_infiniband_symbol_error_total"].status == "empty"
    assert {r.connector for r in reports.values()} == {"prometheus"}


def test_attribute_names_the_flapping_port_from_prometheus(prometheus_url, tmp_path, capsys):
    root = attempt_dir(tmp_path)
    config = write_config(tmp_path / "firstfault.toml", prometheus_url)
    assert main(["attribute", "--static", str(root / "attempt.yaml"), "--json", "--prefect", "never",
                 "--config", str(config), "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["verdict"], verdict["domain"], verdict["subdomain"], verdict["culprit_nodes"]) == (
        "attributed", "network", "ib_link", ["node-02"])
    assert verdict["root_cause"]["rule"] == "ib_port_flaps"
    root_evidence = [e for e in verdict["evidence"] if e["role"] == "root_cause"]
    assert root_evidence and root_evidence[0]["source"] == "metrics"
    assert root_evidence[0]["locator"] == {"series": "node_infiniband_link_downed_total{node=node-02,port=mlx5_0:1}",
                                           "sample_time": iso(FLAP)}
    staged_line = Path(root_evidence[0]["uri"].removeprefix("file://")).read_text().splitlines()[root_evidence[0]["line"] - 1]
    assert staged_line == f"{iso(FLAP)},node-02,node_infiniband_link_downed_total,4.0,,mlx5_0:1"
    ours = [r for r in verdict["connector_reports"] if r["connector"] == "prometheus"]
    assert {r["status"] for r in ours} == {"ok", "empty"}
    assert "prometheus" in verdict["quality"]["sources_present"]


def test_bad_promql_is_an_error_report_sent_once_and_the_other_queries_go_on(prometheus_url, tmp_path):
    ctx = context(attempt_dir(tmp_path))
    prom = connector(prometheus_url, retries=3, backoff_s=5.0,
                     queries={"broken": "rate(node_infiniband_link_downed_total{{nodes}}[5m"})
    prom.transport = CountingTransport()
    reports = prom.stage(ctx, Staging(Lake(str(tmp_path / "lake")), ctx))
    by_metric = {r.reason.split(":")[0]: r for r in reports}
    assert by_metric["broken"].status == "error" and "HTTP 400" in by_metric["broken"].reason
    assert "parse error" in by_metric["broken"].reason  # Prometheus' own message
    assert sum(q.startswith("rate(") for q in prom.transport.queries) == 1  # a 4xx is not retried
    assert by_metric["node_infiniband_link_downed_total"].status == "ok" and by_metric["node_infiniband_link_downed_total"].rows > 0
    assert len(prom.transport.queries) == len(reports)


def test_prometheus_down_is_reported_and_the_verdict_goes_on(tmp_path, capsys):
    root = attempt_dir(tmp_path)
    config = write_config(tmp_path / "firstfault.toml", f"http://127.0.0.1:{free_port()}", "retries = 1\nbackoff_s = 0.01\n")
    assert main(["attribute", "--static", str(root / "attempt.yaml"), "--json", "--prefect", "never",
                 "--config", str(config), "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] in ("attributed", "ambiguous", "unattributed")  # from the application log alone
    ours = [r for r in verdict["connector_reports"] if r["connector"] == "prometheus"]
    assert len(ours) == len(connector("http://x").queries) and {r["status"] for r in ours} == {"error"}
    unreachable = [r for r in ours if "not queried" not in r["reason"]]
    assert len(unreachable) == 1 and "cannot reach" in unreachable[0]["reason"] and "(2 tries)" in unreachable[0]["reason"]
    # one dead server costs one query's retries, not every query's
    assert sum(": not queried: prometheus: cannot reach" in r["reason"] for r in ours) == len(ours) - 1
    assert "prometheus" in verdict["quality"]["sources_missing"]


def test_node_matcher_labels_and_window():
    query, label = expand_nodes("up{{nodes}} + on() x{{nodes:Hostname}}", ("node-02", "node-01"), "instance")
    assert query == "up{instance=~`(?:node\\-01|node\\-02)(?:[.:].*)?`} + on() x{Hostname=~`(?:node\\-01|node\\-02)(?:[.:].*)?`}"
    assert label == "instance"
    assert gpu_label({"gpu": "3", "UUID": "GPU-x", "pci_bus_id": "00000000:9B:00.0"}) == "00000000:9B:00.0"
    assert gpu_label({"gpu": "3", "GPU_I_ID": "2"}) == "3/2"
    assert port_label({"device": "mlx5_0", "port": "1"}) == "mlx5_0:1"
    assert port_label({"device": "nvidia3", "gpu": "3"}) is None
    ctx = context_from_dict({"workload_id": "w", "start": "2026-11-01T00:00:00Z", "end": "2026-11-08T00:00:00Z",
                             "nodes": ["n"]}, "/x/a.yaml", "/x")
    start, end, step = query_window(ctx, PrometheusSettings(url="http://x"))
    assert step > STEP and query_ranges(start, end, step) == [(start, end)]  # a week in one request
    start, end, step = query_window(ctx, PrometheusSettings(url="http://x", step_s=15.0))
    ranges = query_ranges(start, end, step)
    assert ranges[0][0] == start and ranges[-1][1] == end and len(ranges) == 4
    assert all((hi - lo) / step <= MAX_POINTS and nxt[0] == hi + step for (lo, hi), nxt in pairwise(ranges))


def test_config_section_and_its_errors(tmp_path):
    config = load_config(str(write_config(tmp_path / "a.toml", "http://p:9090",
                                          'host_label = "node"\n[prometheus.queries]\nDCGM_FI_DEV_GPU_TEMP = ""\nmine = "x{{nodes}}"\n')))
    prom = from_config(config)
    assert prom.settings.host_label == "node" and prom.queries["mine"] == "x{{nodes}}"
    assert "DCGM_FI_DEV_GPU_TEMP" not in prom.queries and "node_infiniband_link_downed_total" in prom.queries
    assert from_config(Config()) is None
    with pytest.raises(BadInput, match="host_regex"):
        from_config(Config(prometheus=PrometheusSettings(url="http://p", host_regex="^[^:]+")))
