"""Processes that end with the process that started them: a nightly killed with kill -9 must not leave shard workers
or a temporary server behind, landing the same attempts as the run that replaces it."""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def process_pool(workers: int) -> ProcessPoolExecutor:
    """Spawned workers (no state leaks between them) that get SIGKILL when this process dies."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))


def popen_dying_with_parent(args: list[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen of a child that gets SIGKILL when this process dies (armed between fork and exec, so it holds
    for a program that knows nothing of it). Call it from the run's main thread: the signal follows the thread that
    forked."""
    prctl = _prctl()
    parent = os.getpid()

    def arm() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os._exit(1)

    return subprocess.Popen(args, preexec_fn=arm, **kwargs)


def _prctl():
    """libc's prctl, looked up before any fork (None where there is none: not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(parent: int) -> None:
    # Ctrl-C reaches the whole process group: the parent alone stops the run (no traceback printed per worker)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the signal is tied to the thread that spawned the worker: process_pool is only used from a run's main thread
    prctl = _prctl()
    if prctl is None:  # not Linux: workers then end when they next read from the closed pool
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
