"""Reading a whole input file (a static context, a flight-recorder dump) without waiting on what is not a file: a FIFO
named like one blocks open() until a writer comes, and a device may never end. Local paths are opened without
blocking and refused unless fstat says regular file; remote objects are files by construction."""
from __future__ import annotations

import os
import stat

import fsspec

NOT_REGULAR = "not a regular file (a device, a pipe or a folder)"


class NotRegularFile(OSError):
    def __str__(self) -> str:
        return NOT_REGULAR


def read_at_most(uri: str, limit: int) -> bytes:
    """The file's first `limit` + 1 bytes at most (one more than allowed tells the caller it is too big); raises
    NotRegularFile for a local FIFO, device, socket or folder, OSError when it cannot be read."""
    fs, path = fsspec.core.url_to_fs(uri)
    if "file" not in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        with fs.open(path, "rb") as f:
            return f.read(limit + 1)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile()
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        return f.read(limit + 1)
