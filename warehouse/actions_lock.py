"""One process at a time decides, calls and records the actions of a warehouse (warehouse/actions.py): the worker and
an `attribute --slurm` acting at once would both find budget left and both drain.

The lock is an advisory `flock` on `<warehouse>.actions.lock`, beside the warehouse, that a second process waits for
(a holder is short: its scheduler calls end within their timeouts). The kernel releases it when the holder ends,
however it ends (kill -9 included). The file stays: removing it would let a process lock a file no path names."""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def actions_lock_path(warehouse_path: str) -> Path:
    return Path(f"{warehouse_path}.actions.lock")


@contextmanager
def actions_lock(warehouse_path: str) -> Iterator[None]:
    """Hold the warehouse's actions lock, waiting while another process holds it."""
    path = actions_lock_path(warehouse_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
