"""Prefect's temporary API server for a run when no PREFECT_API_URL is set: the server Prefect would start by itself
(uvicorn serving `prefect.server.api.server:create_app` on a loopback port), but as a child that dies with this
process (a nightly killed with kill -9 leaves no server behind) and one for the whole run: Dask workers inherit its
URL instead of each starting their own."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import prefect
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, get_current_settings, temporary_settings

from firstfault.workers import popen_dying_with_parent

_PORT_TAKEN = 3  # uvicorn's exit status when its port was taken meanwhile


@contextmanager
def prefect_api() -> Iterator[str]:
    """The API URL the run talks to: PREFECT_API_URL when set (in the environment or Prefect's settings), else a
    temporary server's, for the `with` block."""
    if PREFECT_API_URL.value():
        yield PREFECT_API_URL.value()
        return
    server, url = _start()
    try:
        os.environ["PREFECT_API_URL"] = url  # for the processes the run starts (Dask workers)
        with temporary_settings(updates={PREFECT_API_URL: url}):
            try:
                yield url
            finally:  # what the run logged goes out while the server answers ("Error logging to API" otherwise)
                APILogWorker.drain_all(timeout=5)
                EventsWorker.drain_all(timeout=5)
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _start():
    # polls 0.1 s apart, as many as Prefect's own start makes: a loaded machine gets the same patience
    polls = int(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value() / 0.1)
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           **get_current_settings().to_environment_variables(exclude_unset=True)}
    while True:
        port = _free_port()
        server = popen_dying_with_parent(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
             "--lifespan", "on"], env=env)
        url = f"http://127.0.0.1:{port}/api"
        with httpx.Client() as client:
            while polls > 0 and server.poll() is None:
                polls -= 1
                try:
                    if client.get(f"{url}/health").status_code == 200:
                        return server, url
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        if server.poll() != _PORT_TAKEN:
            server.kill()
            server.wait()
            raise RuntimeError(f"the temporary Prefect API server did not answer within "
                               f"{PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()} s "
                               "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
