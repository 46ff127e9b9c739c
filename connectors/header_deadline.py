"""uvicorn's h11 protocol with a deadline for each request's head: a connection that has not sent a whole request
line and headers within `[api] header_timeout_s` of connecting (or of its last response) is closed. Without it a
client that connects and sends nothing, or half a header, holds its connection for ever."""
from __future__ import annotations

import asyncio
import functools

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderDeadline(H11Protocol):
    def __init__(self, *args, header_timeout_s: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport):  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc):
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the head came
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()  # the next request's head (keep-alive) has the same deadline
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def with_header_deadline(header_timeout_s: float):
    """The protocol factory to pass as uvicorn.Config(http=...)."""
    return functools.partial(HeaderDeadline, header_timeout_s=header_timeout_s)
