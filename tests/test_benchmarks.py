"""The benchmarks stay out of the test run (they take minutes and measure a quiet machine, not correctness); here they
are only imported, and the rules benchmark run on a pass of a few attempts (it reads the lake's tables itself). The fleet benchmark's pinned simulator profile must spell out every keyword of `simulate` and
every fault kind, so that a new simulator switch (off by default) or a changed default weight cannot change what the
benchmark measures: a new keyword fails here until the profile states its value."""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from firstfault.synthetic.simulate import FAULTS, simulate

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def import_benchmark(name: str, monkeypatch):
    # the benchmarks import their shared measure.py as a script run from benchmarks/ does
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module(name)


@pytest.fixture
def bench_fleet(monkeypatch):
    return import_benchmark("bench_fleet", monkeypatch)


@pytest.mark.parametrize("module, profile", [("bench_fleet", "FLEET_PROFILE"), ("bench_many_files", "MANY_FILES_PROFILE"),
                                             ("bench_backfill", "BACKFILL_PROFILE")])
def test_pinned_profile_spells_out_every_keyword_of_simulate_and_weighs_every_fault(module, profile, monkeypatch):
    pinned = getattr(import_benchmark(module, monkeypatch), profile)
    keywords = {p.name for p in inspect.signature(simulate).parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert set(pinned) == keywords
    assert set(pinned["weights"]) == set(FAULTS)


def test_sizing_changes_only_the_attempts_and_the_padding(bench_fleet):
    profile = bench_fleet.FLEET_PROFILE
    sized = bench_fleet.sized_profile(200, 0.1)
    assert {k for k in profile if sized[k] != profile[k]} == {"attempts", "pad_bytes"}
    assert bench_fleet.sized_profile(profile["attempts"], 2.0) == profile  # the default size is the profile itself


def test_attempt_benchmark_imports(monkeypatch):
    assert callable(import_benchmark("bench_attempt", monkeypatch).main)


def test_rules_benchmark_runs_every_rule_over_the_replicated_demo(monkeypatch, capsys):
    bench = import_benchmark("bench_rules", monkeypatch)
    monkeypatch.setattr("sys.argv", ["bench_rules.py", "--attempts", "18"])
    bench.main()
    out = capsys.readouterr().out
    assert "18 attempts" in out and "attempts/s" in out and "('attributed', " in out


def test_api_benchmark_imports(monkeypatch):
    assert callable(import_benchmark("bench_api", monkeypatch).main)


def _card(*levels: tuple[int, int]) -> dict:
    return {"by_confidence": {level: {"right": right, "verdicts": given} for level, (right, given) in zip(("high", "medium", "low"), levels)}}


def test_the_confidence_table_adds_up_every_set_per_level(monkeypatch):
    table = import_benchmark("confidence_table", monkeypatch).table
    text = table({"one": _card((9, 10), (1, 2), (0, 0)), "two": _card((1, 1), (0, 1), (2, 3))})
    assert "| one | 9 / 10 (90.0 %) | 1 / 2 (50.0 %) | 0 / 0 |" in text
    assert text.splitlines()[-1] == "| **all** | 10 / 11 (90.9 %) | 1 / 3 (33.3 %) | 2 / 3 (66.7 %) |"


def test_the_documented_confidence_table_is_the_scripts_and_high_is_right_99_percent_of_the_time(monkeypatch):
    module = import_benchmark("confidence_table", monkeypatch)
    doc = module.DOC.read_text(encoding="utf-8")
    section = doc[doc.index(module.BEGIN) + len(module.BEGIN):doc.index(module.END)].strip()
    assert module.replace_in_doc(doc, section) == doc
    header, _, *rows = section.splitlines()
    assert header == "| set | high | medium | low |" and rows[-1].startswith("| **all** |")
    right, given = map(int, rows[-1].split("|")[2].split("(")[0].split("/"))
    assert given > 0 and right / given >= 0.99
