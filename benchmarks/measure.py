"""What the benchmarks measure the same way: a whole process's wall time and the peak memory of its process tree, the
grep baseline over the same bytes, and the flat-memory check.

Imported by the benchmark scripts (run as `.venv/bin/python benchmarks/bench_*.py`, which puts this folder on the
import path). Not part of the CI test run.
"""
from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

#: the team's baseline: the trigger words an operator would grep for, counted over the same log files
GREP = "NCCL WARN|NVRM: Xid|Watchdog caught|Traceback|error|fallen off|Link down"
#: peak memory at 4x the volume, or with 95 % progress lines, may grow to this multiple of the base run's
FLAT_LIMIT = 1.1


def grep_seconds(paths: Sequence[Path]) -> float:
    """Wall time of `LC_ALL=C grep -cE GREP` over the *.log files of `paths` (files or folders, searched at any
    depth: a fleet has more files than one command line holds), page cache warmed by a first pass."""
    cmd = ["grep", "-rcE", GREP, "--include=*.log", *map(str, paths)]
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(cmd, stdout=subprocess.PIPE, env=env)  # warm the page cache
    started = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, env=env)  # a pipe: grep stops early on /dev/null
    if done.returncode not in (0, 1):
        raise RuntimeError("grep failed")
    return time.perf_counter() - started


class TreeMemory:
    """Peak RSS of the largest process and of the whole process tree, sampled every 50 ms (RUSAGE_CHILDREN would
    give only the largest, and only of waited-for children)."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.largest = self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
                rss = [p.memory_info().rss for p in procs]
            except psutil.Error:
                rss = []
            if rss:
                self.largest, self.total = max(self.largest, max(rss)), max(self.total, sum(rss))
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Measured:
    wall_s: float
    largest_mb: float  # peak RSS of the largest process of the tree
    total_mb: float  # peak RSS of the tree's processes together
    cpu_s: float  # user + system CPU of the tree: what a machine shared with other work inflates least
    stdout: str


def measured_run(cmd: Sequence[str], env: dict[str, str]) -> Measured:
    """Run `cmd` as a whole process (start-up included) with its tree's memory sampled; raise when it fails."""
    cpu_before = children_cpu_s()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    memory = TreeMemory(proc.pid)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    cpu = children_cpu_s() - cpu_before
    memory.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[-12:])} failed ({proc.returncode}): {stderr[-2000:]}")
    return Measured(wall, memory.largest / 1e6, memory.total / 1e6, cpu, stdout)


def children_cpu_s() -> float:
    """CPU seconds of this process's ended children and of the descendants they waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def memory_is_flat(base_mb: float, peaks_mb: dict[str, float]) -> bool:
    """Print each run's peak against the base's; False when one exceeds FLAT_LIMIT times the base."""
    over = [name for name, mb in peaks_mb.items() if mb > FLAT_LIMIT * base_mb]
    for name, mb in peaks_mb.items():
        print(f"memory: {name} peak {mb:.0f} MB = {mb / base_mb:.2f}x the base's {base_mb:.0f} MB (limit {FLAT_LIMIT}x)")
    if over:
        print(f"FAIL: peak memory not flat ({', '.join(over)})")
    return not over
