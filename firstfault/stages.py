"""CPU seconds per pipeline stage, for the benchmarks: off (free) unless FIRSTFAULT_STAGE_CPU names a JSON file, which
gets {stage: CPU seconds} when the process exits. Process CPU time is used (polars and Arrow work on their own
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
    with open(REPORT_FILE, "w", encoding="utf-8") as f:
        json.dump({"total": time.process_time(), **dict(sorted(_cpu.items()))}, f)


if ENABLED:
    atexit.register(_write_report)
