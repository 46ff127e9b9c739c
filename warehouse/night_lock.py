"""One nightly run per warehouse at a time: two at once would race on the lake's result folders and on the load.

The lock is an advisory `flock` on `<warehouse>.nightly.lock`, beside the warehouse. The kernel releases it when the
holding process ends however it ends (kill -9 included), so a lock left by a dead run is simply taken over; the file
holds the holder's run id, pid, host and start time, to name it to the run that finds it taken. The holder removes
the file as it ends (nothing is left beside the warehouse); a run that opened the file just before it was removed
would lock a file no path names, so after taking the lock a run checks that the path still names its file, and opens
the path again when it does not.
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
    fd = _lock(path)
    try:
        holder = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                  "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        _rewrite(fd, json.dumps(holder) + "\n")
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # while still locked: a run waiting for this file sees it gone
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock(path: Path) -> int:
    """An open descriptor of the lock file at `path`, exclusively locked."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BadInput(str(path), "nightly", f"{holder} holds this warehouse: one nightly run at a time") from None
        if _names(path, fd):
            return fd
        os.close(fd)  # the holder removed this file as it ended: lock the file the path names now


def _names(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


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
