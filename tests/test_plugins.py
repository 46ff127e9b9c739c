"""Plug-in connectors found through entry points: a plug-in distribution is built at test time (a module and its
dist-info, as pip would leave them) and put on sys.path, where importlib.metadata finds its entry points."""
import importlib
import json
import sys

import pytest

from firstfault.cli import main

XID_LOGS = '''
"""Source plug-in: stages the kernel lines of one node, taken from its [plugins.xidlogs] settings."""
from firstfault.connectors.base import Report


class XidLogs:
    name = "xidlogs"

    def __init__(self, node, lines):
        self.node, self.lines = node, lines

    def applies(self, ctx):
        return self.node in ctx.nodes

    def stage(self, ctx, staging):
        origin = {"backend": "test-tsdb", "node": self.node}
        with staging.open_log(self.name, f"{self.node}.log", source="syslog", origin=origin) as f:
            f.write("".join(line + "\\n" for line in self.lines).encode())
        return [Report(self.name, "syslog", f"test-tsdb://kernel/{self.node}", "ok", len(self.lines))]


def from_config(config):
    settings = config.plugins.get("xidlogs")
    return XidLogs(settings["node"], settings["lines"]) if settings else None
'''

TINY_SCHEDULER = '''
"""Scheduler plug-in: one job, `job-7`, whose kernel logs are in the folder [plugins.tinysched] logs names."""
from firstfault.connectors.static_context import context_from_dict


class TinyScheduler:
    name = "tinysched"

    def __init__(self, logs):
        self.logs = logs

    def resolve(self, ref):
        if ref != "job-7":
            return []
        doc = {"workload_id": ref, "cluster": "tiny", "state": "FAILED", "start": "2026-11-29T01:00:00Z",
               "end": "2026-11-29T02:00:00Z", "nodes": ["node-01", "node-02"],
               "logs": [{"source": "syslog", "path": "{node}.log"}]}
        return [context_from_dict(doc, f"tinysched:{ref}", self.logs)]

    def discover(self, start, end):
        return []


def from_config(config):
    settings = config.plugins.get("tinysched")
    return TinyScheduler(settings["logs"]) if settings else None
'''

XID_79 = "NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


@pytest.fixture()
def install_plugin(tmp_path, monkeypatch):
    """install_plugin(module, source, group, name): a distribution `<module>-0.1` on sys.path whose entry point
    `name` in `group` is `<module>:from_config`."""
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    modules = []

    def install(module: str, source: str, group: str, name: str) -> None:
        (site / f"{module}.py").write_text(source, encoding="utf-8")
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
        (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {module}:from_config\n", encoding="utf-8")
        importlib.invalidate_caches()  # the import system and importlib.metadata cache directory listings
        modules.append(module)

    yield install
    for module in modules:
        sys.modules.pop(module, None)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def attribute_json(capsys, *args) -> dict:
    assert main(["attribute", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_source_plugin_evidence_names_the_node(install_plugin, tmp_path, capsys):
    install_plugin("ff_xid_logs", XID_LOGS, "firstfault.sources", "xidlogs")
    config = write(tmp_path / "firstfault.toml", "\n".join([
        "[plugins.xidlogs]",
        'node = "node-02"',
        f'lines = ["2026-11-29T01:37:12.000000Z {XID_79}"]',
        f'[lake]\nroot = "{tmp_path / "lake"}"',
        f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"',
    ]))
    # a context with no logs of its own: all the evidence comes from the plug-in
    spec = write(tmp_path / "attempt.yaml", "workload_id: plugin-demo\nstate: FAILED\nstart: '2026-11-29T01:00:00Z'\n"
                                            "end: '2026-11-29T02:00:00Z'\nnodes: [node-01, node-02]\n")
    v = attribute_json(capsys, "--static", spec, "--config", config)
    assert (v["verdict"], v["domain"], v["subdomain"], v["culprit_nodes"]) == ("attributed", "hardware", "gpu_lost", ["node-02"])
    root = [e for e in v["evidence"] if e["role"] == "root_cause"]
    assert len(root) == 1 and XID_79 in root[0]["text"]
    assert root[0]["locator"]["origin"] == {"backend": "test-tsdb", "node": "node-02"}
    report = [r for r in v["connector_reports"] if r["connector"] == "xidlogs"]
    assert report == [{"connector": "xidlogs", "source": "syslog", "uri": "test-tsdb://kernel/node-02", "status": "ok",
                       "rows": 1, "reason": None}]


def test_scheduler_plugin_resolves_attribute_scheduler(install_plugin, tmp_path, capsys):
    install_plugin("ff_tiny_scheduler", TINY_SCHEDULER, "firstfault.schedulers", "tinysched")
    logs = tmp_path / "kernel"
    write(logs / "node-01.log", "Nov 29 01:00:05 node-01 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n")
    write(logs / "node-02.log", f"Nov 29 01:00:05 node-02 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"
                                f"Nov 29 01:41:09 node-02 kernel: {XID_79}\n")
    config = write(tmp_path / "firstfault.toml", f'[plugins.tinysched]\nlogs = "{logs}"\n')
    where = ["--config", config, "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    v = attribute_json(capsys, "--scheduler", "tinysched:job-7", *where)
    assert v["attempt_id"] == "tiny/job-7/0"
    assert (v["verdict"], v["subdomain"], v["culprit_nodes"]) == ("attributed", "gpu_lost", ["node-02"])

    assert main(["attribute", "--scheduler", "tinysched:job-8", *where]) == 2
    assert "'job-8': no attempt found" in capsys.readouterr().err


@pytest.mark.parametrize(("source", "says"), [
    ("import firstfault_missing_dependency\n", "cannot be loaded: ModuleNotFoundError"),
    ("def from_config(config):\n    return config.plugins['broken']['url']\n", "from_config': failed: KeyError"),
])
def test_broken_plugin_is_exit_2_naming_it(install_plugin, demo_dir, tmp_path, capsys, source, says):
    install_plugin("ff_broken", source, "firstfault.sources", "broken")
    assert main(["attribute", "--static", str(demo_dir / "attempts" / "headline" / "attempt.yaml"),
                 "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "broken" in err and says in err
