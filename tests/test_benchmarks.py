"""The benchmarks stay out of the test run (they take minutes and measure a quiet machine, not correctness); here they
are only imported. The fleet benchmark's pinned simulator profile must spell out every keyword of `simulate` and
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


def test_api_benchmark_imports(monkeypatch):
    assert callable(import_benchmark("bench_api", monkeypatch).main)
