"""The fleet simulator: deterministic, its truth matches what it wrote, and a small fleet is attributed accurately."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from firstfault.cli import main
from firstfault.synthetic.simulate import CATALOGUE_SHAPES, FAULTS, REAL_SHAPES, T0, attribute_fleet, catalogue_roots, evaluate, read_truth, simulate

from conftest import warehouse_rows


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_same_seed_same_fleet(tmp_path):
    simulate(tmp_path / "a", nodes=32, attempts=15, days=1, seed=3, lines=(50, 120))
    simulate(tmp_path / "b", nodes=32, attempts=15, days=1, seed=3, lines=(50, 120))
    simulate(tmp_path / "c", nodes=32, attempts=15, days=1, seed=4, lines=(50, 120))
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_every_injected_root_line_is_in_the_written_logs(tmp_path):
    simulate(tmp_path, nodes=64, attempts=120, days=3, seed=11, lines=(20, 40))
    truth = read_truth(tmp_path)
    kinds = {t["kind"] for t in truth}
    assert {"success", "gpu_lost", "gpu_memory", "ambiguous"} <= kinds
    for t in truth:
        folder = (tmp_path / t["spec"]).parent
        text = "".join(p.read_text() for p in folder.rglob("*.log"))
        assert t["root_lines"] or t["kind"] in ("success", "watchdog_unknown"), t
        for line in t["root_lines"]:
            assert line in text, (t["attempt_id"], line)
        assert (t["verdict"] == "attributed") == t["attributable"] or t["verdict"] == "not_failed"
        for node in t["culprit_nodes"]:
            assert (folder / "kernel" / f"{node}.log").exists()
    assert (tmp_path / "topology.yaml").exists()


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    simulate(root, nodes=48, attempts=40, days=2, seed=5, lines=(80, 200))
    return root, attribute_fleet(root)


def test_small_fleet_is_attributed_accurately(small_fleet):
    root, warehouse = small_fleet
    result = evaluate(root, warehouse)
    assert result["missing"] == 0
    assert result["attributable_failures"] >= 10
    assert result["domain_accuracy"] >= 0.95, result["misses"] + result["confident_wrong_attempts"]
    assert result["culprit_accuracy"] >= 0.95, result["misses"] + result["confident_wrong_attempts"]
    assert result["confident_wrong"] == 0, result["confident_wrong_attempts"]


def test_evaluate_command(small_fleet, capsys):
    root, warehouse = small_fleet
    assert main(["evaluate", "--truth", str(root), "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    assert "domain accuracy" in out and "confusion" in out
    assert main(["evaluate", "--truth", str(root / "nowhere")]) == 2


def test_real_shapes_are_written_and_attributed(tmp_path):
    """The REAL_SHAPES kinds (host OOM under a DataLoader death, a read-only remount under a checkpoint, a kernel
    panic, NaN gradients, a vanished node) are off by default and attributed correctly when turned on."""
    weights = {**{k: 0 for k in FAULTS}, **REAL_SHAPES}
    simulate(tmp_path, nodes=32, attempts=30, days=1, seed=5, lines=(40, 80), weights=weights)
    assert {t["kind"] for t in read_truth(tmp_path)} == set(REAL_SHAPES)
    result = evaluate(tmp_path, attribute_fleet(tmp_path))
    assert result["missing"] == 0
    assert result["domain_accuracy"] == 1.0 and result["culprit_accuracy"] == 1.0, result["misses"] + result["confident_wrong_attempts"]
    assert result["confident_wrong"] == 0, result["confident_wrong_attempts"]


def test_catalogue_shapes_write_every_familys_roots_and_are_attributed(tmp_path):
    """CATALOGUE_SHAPES (off by default) makes each attempt's fault a catalogue root written as its rendered line on
    the culprit (its class is the truth): a small fleet draws every family that has such a root, all attributed."""
    simulate(tmp_path, nodes=16, attempts=60, days=1, seed=3, lines=(20, 40), max_job_nodes=4, weights=CATALOGUE_SHAPES)
    truth = read_truth(tmp_path)
    assert {t["kind"] for t in truth} == {"catalogue"}
    families = {m.file for ms in catalogue_roots().values() for m, _ in ms if m.id in {t["catalogue"] for t in truth}}
    assert families == set(catalogue_roots()), sorted(set(catalogue_roots()) - families)
    result = evaluate(tmp_path, attribute_fleet(tmp_path))
    assert result["missing"] == 0 and result["accuracy"] == 1.0, result["misses"]
    assert result["confident_wrong"] == 0, result["confident_wrong_attempts"]


# The default fleets are the fleet benchmark's pinned profile: new simulator options stay off by default and draw from
# random streams of their own, so these bytes change only when the default fleet is meant to change.
PINNED = [
    (dict(nodes=32, attempts=40, days=2, seed=7, lines=(20, 60)), "3df14548b39b510eb39e8bc9f881ab304c5a4aa0cdb67d420642a5a43aeba5aa"),
    (dict(nodes=32, attempts=20, days=2, seed=7, lines=(20, 60), pad_bytes=2000), "7ecb4353274b085ea7b77030aeb7b1b885cbfab50bb144a4230bdc1823260937"),
]


@pytest.mark.parametrize("params, digest", PINNED)
def test_default_fleet_bytes_are_pinned(tmp_path, params, digest):
    simulate(tmp_path, **params)
    assert _digest(tmp_path) == digest
    assert not list(tmp_path.rglob("metrics")) and all(t["attempt_id"].endswith("/0") for t in read_truth(tmp_path))


def test_metrics_and_requeues_are_attributed_by_the_nightly(tmp_path, capsys):
    """A fleet with per-attempt metrics (DCGM and IB counters moved by the injected faults) and requeued attempts,
    run through `firstfault nightly` night by night and scored by `firstfault evaluate`: the simulator's accuracy."""
    weights = {"gpu_lost": 80, "gpu_memory": 80, "gpu_nvlink": 60, "gpu_firmware": 40, "ib_link": 80, **REAL_SHAPES}
    simulate(tmp_path / "fleet", nodes=32, attempts=40, days=1, seed=4, lines=(20, 40), max_job_nodes=4, weights=weights,
             metrics=True, requeue_share=0.6)
    truth = read_truth(tmp_path / "fleet")
    requeued = [t for t in truth if not t["attempt_id"].endswith("/0")]
    assert len(requeued) >= 5 and {t["kind"] for t in requeued} - {"success"}, requeued
    assert len(list((tmp_path / "fleet" / "catalog").glob("*/*/metrics/*.csv"))) == len(truth)
    warehouse = str(tmp_path / "wh.duckdb")
    common = ["--catalog", str(tmp_path / "fleet" / "catalog"), "--lake", str(tmp_path / "lake"), "--warehouse", warehouse]
    assert main(["-q", "nightly", "--since", T0.date().isoformat(), "--until", "2026-11-03", *common, "--prefect", "never"]) == 0
    capsys.readouterr()
    assert main(["-q", "evaluate", "--truth", str(tmp_path / "fleet"), "--warehouse", warehouse, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["missing"] == 0 and result["attributable_failures"] >= 20, result
    assert result["domain_accuracy"] == 1.0 and result["culprit_accuracy"] == 1.0, result["misses"] + result["confident_wrong_attempts"]
    assert result["confident_wrong"] == 0, result["confident_wrong_attempts"]
    metric_rules = {r["rule_id"] for r in warehouse_rows(warehouse, "SELECT DISTINCT rule_id FROM rule_hits WHERE role = 'root'")}
    assert {"dcgm_gpu_health", "ib_port_flaps"} <= metric_rules


def test_job_sizes_and_kernel_padding_shape_many_small_files(tmp_path):
    """The many-files shape (benchmarks/bench_many_files.py): jobs of the given sizes, every node's kernel log padded
    to about kernel_pad_bytes with chatter that extracts no event."""
    from firstfault.landing import events_from_lines
    from firstfault.synthetic.simulate import KERNEL_CHATTER

    simulate(tmp_path, nodes=64, attempts=6, days=1, seed=2, lines=(20, 40), job_sizes={8: 1, 12: 1},
             kernel_pad_bytes=6_000)
    for t in read_truth(tmp_path):
        kernel_logs = sorted(((tmp_path / t["spec"]).parent / "kernel").glob("*.log"))
        assert t["nodes"] in (8, 12) and len(kernel_logs) == t["nodes"]
        assert all(log.stat().st_size > 5_000 for log in kernel_logs if log.stem not in t["culprit_nodes"])
    chatter = [line.format(n=4711, ms=12, pid=345678, k=12, h=0x1a2b3c4, port=40123) for line in KERNEL_CHATTER]
    assert events_from_lines([f"Nov 03 10:11:12 gpu-0001 kernel: [259434.123456] {c}" for c in chatter], "syslog",
                             node="gpu-0001").height == 0
