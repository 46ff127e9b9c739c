"""CPU seconds per pipeline stage, for the benchmarks: off (free) unless FIRSTFAULT_STAGE_CPU names a file, to which
every process of the run (the workers landing parts of a big file too) appends one JSON line {stage: CPU seconds}
when it exits (`read_report` adds them up). Process CPU time is used (polars and Arrow work on their own
threads), so while it is on the landing normalises one unit at a time: overlapping stages would count twice."""
from __future__ import annotations

import atexit
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

REPORT_FILE = os.environ.get("FIRSTFAULT_STAGE_CPU", "")
ENABLED = bool(REPORT_FILE)
_cpu: dict[str, float] = defaultdict(float)


@contextmanager
def stage(name: str) -> Iterator[None]:
    if not ENABLED:
        yield
        return
    started = time.process_time()
    try:
        yield
    finally:
        _cpu[name] += time.process_time() - started


def _write_report() -> None:
    with open(REPORT_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps({"total": time.process_time(), **dict(sorted(_cpu.items()))}) + "\n")


def read_report(path: str) -> dict[str, float]:
    """The CPU seconds per stage of every process that wrote to `path`, added up."""
    total: dict[str, float] = defaultdict(float)
    with open(path, encoding="utf-8") as f:
        for line in f:
            for name, seconds in json.loads(line).items():
                total[name] += seconds
    return dict(total)


if ENABLED:
    atexit.register(_write_report)
