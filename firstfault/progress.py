"""Progress of long work on stderr. On a terminal one line is redrawn in place (done/total, MB, rate, ETA); otherwise
(a cron log, a pipe) each stage prints one summary line when it ends. Off until the CLI turns it on: the API, the
flows' workers and library callers print nothing."""
from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

_REDRAW_S = 0.2  # a terminal line redrawn more often only flickers
_enabled = False


def enable(on: bool = True) -> None:
    global _enabled
    _enabled = on


class Stage:
    def __init__(self, name: str, total: int | None, unit: str, stream=None):
        self.name, self.total, self.unit = name, total, unit
        self.stream = stream or sys.stderr
        self.live = _enabled and self.stream.isatty()
        self.done = 0
        self.nbytes = 0
        self.started = time.monotonic()
        self._drawn = 0.0

    def advance(self, n: int = 1, nbytes: int = 0) -> None:
        self.done += n
        self.nbytes += nbytes
        if self.live and time.monotonic() - self._drawn >= _REDRAW_S:
            self._drawn = time.monotonic()
            self.stream.write("\r" + self.line(final=False) + "\x1b[K")
            self.stream.flush()

    def line(self, *, final: bool) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        count = f"{self.done}/{self.total}" if self.total is not None and not final else str(self.done)
        parts = [f"{count} {self.unit}"]
        if self.nbytes:
            parts.append(f"{self.nbytes / 1e6:.1f} MB")
        if final:
            return f"{self.name}: {', '.join(parts)} in {elapsed:.1f} s"
        rate = self.done / elapsed
        parts.append(f"{rate:.1f} {self.unit}/s")
        if self.total and self.done:
            parts.append(f"ETA {format_seconds((self.total - self.done) / rate)}")
        return f"{self.name}: {', '.join(parts)}"

    def close(self, *, ok: bool) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
        if _enabled and ok:
            self.stream.write(self.line(final=True) + "\n")
        self.stream.flush()


@contextmanager
def stage(name: str, total: int | None = None, unit: str = "attempts") -> Iterator[Stage]:
    """One stage of work; its summary line is printed only when it ends without an exception."""
    s = Stage(name, total, unit)
    try:
        yield s
    except BaseException:
        s.close(ok=False)
        raise
    s.close(ok=True)


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
