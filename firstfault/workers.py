"""Worker processes that end with the process that started them: a nightly killed with kill -9 must not leave shard
workers behind, landing the same attempts as the run that replaces it."""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def process_pool(workers: int) -> ProcessPoolExecutor:
    """Spawned workers (no state leaks between them) that get SIGKILL when this process dies."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))


def _die_with_parent(parent: int) -> None:
    # Ctrl-C reaches the whole process group: the parent alone stops the run (no traceback printed per worker)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the signal is tied to the thread that spawned the worker: process_pool is only used from a run's main thread
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: workers then end when they next read from the closed pool
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
