"""The trigger scan: which lines of a log contain one of the extraction triggers, by each candidate matcher, over the
same bytes (the lines of bench_attempt.py's attempt). Every matcher must find the same lines; prints the best of three
runs of each, in MB/s, beside `grep -F -n` on the same file.

    .venv/bin/pip install hyperscan pyahocorasick ahocorasick-rs   # the optional candidates
    .venv/bin/python benchmarks/bench_trigger_scan.py [--mb 200]

Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attempt import generate, inputs  # noqa: E402  (a sibling script, not a package)

from firstfault.transforms.extract import load_patterns, trigger_literals  # noqa: E402
from firstfault.transforms.multiline import MULTILINE_TRIGGERS  # noqa: E402


def line_numbers(data: bytes, offsets: np.ndarray) -> np.ndarray:
    """0-based line of each byte offset."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    return np.unique(np.searchsorted(newlines, offsets))


def polars_contains_any(data: bytes, triggers: list[str]) -> np.ndarray:
    lines = pl.Series(data.decode("utf-8", "replace").split("\n")[:-1])
    return lines.str.contains_any(triggers).arg_true().to_numpy()


def polars_regex_alternation(data: bytes, triggers: list[str]) -> np.ndarray:
    pattern = "|".join(re.escape(t) for t in sorted(triggers, key=len, reverse=True))
    lines = pl.Series(data.decode("utf-8", "replace").split("\n")[:-1])
    return lines.str.contains(pattern).arg_true().to_numpy()


def hyperscan_over_bytes(data: bytes, triggers: list[str]) -> np.ndarray:
    import hyperscan

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[re.escape(t).encode() for t in triggers], ids=list(range(len(triggers))),
               elements=len(triggers), flags=[0] * len(triggers))
    ends: list[int] = []
    db.scan(data, match_event_handler=lambda _id, _start, end, _flags, _ctx: ends.append(end - 1))
    return line_numbers(data, np.asarray(ends, dtype=np.int64))


def pyahocorasick_over_text(data: bytes, triggers: list[str]) -> np.ndarray:
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for t in triggers:
        automaton.add_word(t, t)
    automaton.make_automaton()
    text = data.decode("latin-1")  # one character per byte: offsets are byte offsets
    return line_numbers(data, np.fromiter((end for end, _ in automaton.iter(text)), dtype=np.int64))


def ahocorasick_rs_over_text(data: bytes, triggers: list[str]) -> np.ndarray:
    import ahocorasick_rs

    matcher = ahocorasick_rs.AhoCorasick(triggers, matchkind=ahocorasick_rs.MatchKind.LeftmostFirst)
    text = data.decode("latin-1")
    return line_numbers(data, np.asarray([start for _, start, _ in matcher.find_matches_as_indexes(text, overlapping=False)],
                                         dtype=np.int64))


CANDIDATES: dict[str, tuple[Callable, str | None]] = {
    "polars str.contains_any (lines)": (polars_contains_any, None),
    "polars regex alternation (lines)": (polars_regex_alternation, None),
    "hyperscan (bytes)": (hyperscan_over_bytes, "hyperscan"),
    "pyahocorasick (text)": (pyahocorasick_over_text, "ahocorasick"),
    "ahocorasick-rs (text)": (ahocorasick_rs_over_text, "ahocorasick_rs"),
}


def best_of(runs: int, fn: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = generate(Path(tmp) / "attempt", args.mb, 0.77)
        data = b"".join(p.read_bytes() for p in inputs(spec))
        whole = Path(tmp) / "all.log"
        whole.write_bytes(data)
        patterns = load_patterns()
        every = sorted(set(trigger_literals(patterns)) | set(MULTILINE_TRIGGERS))
        # progress markers are most lines of a training log: with them summarised, the candidates become rare
        rare = sorted(set(trigger_literals([p for p in patterns if p.kind != "progress"])) | set(MULTILINE_TRIGGERS))
        for label, triggers in (("every trigger", every), ("without progress markers", rare)):
            words = Path(tmp) / "triggers.txt"
            words.write_text("\n".join(triggers))
            grep_s, _ = best_of(3, lambda: subprocess.run(["grep", "-F", "-c", "-f", str(words), str(whole)],
                                                          stdout=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"}))
            compare(data, triggers, label, grep_s)


def compare(data: bytes, triggers: list[str], label: str, grep_s: float) -> None:
    mb = len(data) / 1e6
    lines = data.count(b"\n")
    print(f"{label}: {mb:.0f} MB, {lines:,} lines, {len(triggers)} triggers; grep -F -c: {grep_s:.3f} s ({mb / grep_s:,.0f} MB/s)")
    reference = None
    for name, (fn, module) in CANDIDATES.items():
        if module and importlib.util.find_spec(module) is None:
            print(f"{name:>34}: not installed")
            continue
        seconds, found = best_of(3, lambda: fn(data, triggers))
        reference = found if reference is None else reference
        same = "same lines" if np.array_equal(found, reference) else f"DIFFERENT lines ({len(found)} vs {len(reference)})"
        print(f"{name:>34}: {seconds:7.3f} s  {mb / seconds:8,.0f} MB/s  {len(found):,} lines  {same}")


if __name__ == "__main__":
    main()
