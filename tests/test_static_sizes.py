"""Sizes that multiply: the `[api]` limits on nodes, ranks and GPUs per node hold for static-context files too
(`attribute --static` exits 2 naming the field, a nightly records a failure row), and a file far over them is refused
before anything is built for its ranks."""
import json
import subprocess
import sys
import time
from datetime import date

import pytest

from firstfault.cli import main
from firstfault.config import ApiSettings
from firstfault.connectors.catalog import discover

BASE = {"workload_id": "w", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z"}


def nodes(n: int) -> list[str]:
    return [f"n{i:06d}" for i in range(n)]


@pytest.mark.parametrize("changes, problem", [
    ({"nodes": nodes(1025)}, "field 'nodes': 1025 is over the limit of 1024 ([api] max_nodes)"),
    ({"nodes": nodes(1), "gpus_per_node": 128}, "field 'gpus_per_node': 128 is over the limit of 64 ([api] max_gpus_per_node)"),
    ({"nodes": nodes(1000), "gpus_per_node": 16},
     "field 'gpus_per_node': nodes x gpus_per_node = 16000 is over the limit of 8192 ([api] max_ranks)"),
    ({"nodes": nodes(1), "ranks": [{"rank": r, "node": "n000000"} for r in range(8193)]},
     "field 'ranks': 8193 is over the limit of 8192 ([api] max_ranks)"),
])
def test_a_file_over_the_limits_is_exit_2_naming_the_field(tmp_path, capsys, changes, problem):
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({**BASE, **changes}))
    assert main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake")]) == 2
    assert capsys.readouterr().err == f"firstfault: {spec}: {problem}\n"


def test_the_limits_are_configurable(tmp_path, capsys):
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({**BASE, "nodes": nodes(1100), "gpus_per_node": 1}))
    config = tmp_path / "firstfault.toml"
    config.write_text("[api]\nmax_nodes = 2048\n")
    assert main(["attribute", "--static", str(spec), "--config", str(config), "--lake", str(tmp_path / "lake"),
                 "--warehouse", str(tmp_path / "w.duckdb")]) == 0, capsys.readouterr().err


def run_measured(args: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, int]:
    """`firstfault ARGS` as a process of its own, and its peak RSS in KB: a wrapper process reports the peak of its only
    child (this process's RUSAGE_CHILDREN would hold the largest child any earlier test started)."""
    wrapper = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "firstfault.cli", *args],
                          capture_output=True, text=True, timeout=timeout)
    stderr, _, peak = done.stderr.rstrip("\n").rpartition("\n")
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, stderr), int(peak)


def test_a_nightly_records_a_spec_over_the_limits_as_a_failure(tmp_path):
    (tmp_path / "big.json").write_text(json.dumps({**BASE, "nodes": nodes(2000)}))
    by_day, failures, _ = discover([str(tmp_path / "*.json")], [date(2026, 11, 29)], limits=ApiSettings())
    assert by_day == {date(2026, 11, 29): []}
    assert [(f["stage"], f["error"]) for f in failures] == [
        ("spec", f"{tmp_path / 'big.json'}: field 'nodes': 2000 is over the limit of 1024 ([api] max_nodes)")]


def test_100000_nodes_at_1024_gpus_each_are_refused_at_once(tmp_path):
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({**BASE, "nodes": nodes(100_000), "gpus_per_node": 1024}))
    began = time.monotonic()
    done, peak_kb = run_measured(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake")], timeout=120)
    assert done.returncode == 2 and "([api] max_nodes)" in done.stderr, done.stderr
    assert time.monotonic() - began < 20
    assert peak_kb < 1_500_000


def test_a_file_name_names_its_node_whatever_the_number_of_nodes():
    from firstfault.connectors.local_files import node_in_name

    nodes = frozenset([f"node-{i}" for i in range(100_000)] + ["gpu", "a.b"])
    assert node_in_name("node-1.log", nodes) == "node-1"
    assert node_in_name("syslog-node-10.gz", nodes) == "node-10"  # the longest name, node-1 is not cut out of node-10
    assert node_in_name("node-10x.log", nodes) is None             # only between non-alphanumeric characters
    assert node_in_name("a.b-kernel.log", nodes) == "a.b" and node_in_name("xa.b.log", nodes) is None
    began = time.monotonic()
    for i in range(2000):
        node_in_name(f"rank{i}-node-{i * 7}.stdout.log", nodes)
    assert time.monotonic() - began < 2


def test_100000_nodes_under_raised_limits_build_nothing_per_node_for_each_file(tmp_path):
    (tmp_path / "n000001.log").write_text("Nov 29 01:10:02 n000001 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({**BASE, "nodes": nodes(100_000), "logs": [{"path": f"n{i:06d}.log"} for i in range(1, 3)]}))
    config = tmp_path / "firstfault.toml"
    config.write_text("[api]\nmax_nodes = 100000\nmax_ranks = 1000000\n")
    began = time.monotonic()
    done, peak_kb = run_measured(["attribute", "--static", str(spec), "--config", str(config), "--lake", str(tmp_path / "lake"),
                                  "--warehouse", str(tmp_path / "w.duckdb")], timeout=300)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began < 60
    assert peak_kb < 1_500_000
