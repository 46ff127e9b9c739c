"""One nightly run per warehouse at a time: two at once would race on the lake's result folders and on the load.

The lock is an advisory `flock` on `<warehouse>.nightly.lock`, beside the warehouse. The kernel releases it when the
holding process ends however it ends (kill -9 included), so a lock left by a dead run is simply taken over; the file
holds the holder's run id, pid, host and start time, to name it to the run that finds it taken. The file is never
removed (a process waiting on the old file while a new one is created would hold a lock of its own), only emptied.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from firstfault.errors import BadInput


def lock_path(warehouse_path: str) -> Path:
    return Path(f"{warehouse_path}.nightly.lock")


@contextmanager
def nightly_lock(warehouse_path: str, run_id: str) -> Iterator[None]:
    """Hold the warehouse's nightly lock for `run_id`; BadInput naming the holder when another run has it."""
    path = lock_path(warehouse_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(str(path), "nightly", f"{_holder(fd)} holds this warehouse: one nightly run at a time") from None
        holder = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                  "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        _rewrite(fd, json.dumps(holder) + "\n")
        try:
            yield
        finally:
            _rewrite(fd, "")
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    """The holder as the lock file names it (a holder still writing it reads as "another nightly run")."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"nightly run {holder['run_id']} (pid {holder['pid']} on {holder['host']}, since {holder['started_at']})"
    except (ValueError, KeyError, TypeError):
        return "another nightly run"


def _rewrite(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode("utf-8"), 0)
