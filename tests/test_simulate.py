"""The fleet simulator: deterministic, its truth matches what it wrote, and a small fleet is attributed accurately."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from firstfault.synthetic.simulate import FAULTS, REAL_SHAPES, attribute_fleet, evaluate, read_truth, simulate


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
    from firstfault.cli import main

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
