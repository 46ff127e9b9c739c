"""Separate test hosts on one machine: network namespaces on a private subnet, joined by a bridge.

Each host is a network namespace of its own (``ip netns``) with one address on the test subnet; the first host holds
the bridge the others' veth pairs plug into, so no address of the test subnet lives in the machine's own namespace
and no test traffic leaves the namespaces this module made. Processes are started in a host with ``ip netns exec``,
in a session of their own so that a host can be lost whole (every process in it killed at once). ``close`` kills what
is left and deletes the namespaces (also after a failed test: use it as a context manager).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

SUBNET = "10.250.{}.{}"  # a private subnet that only exists inside the namespaces of one test run


def namespaces_available() -> str | None:
    """None when network namespaces can be made here, else why not (a test skips with that reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"ffprobe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip() or made.returncode}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class TestHosts:
    """Hosts on one bridge: ``hosts.add("scheduler")`` → its address; ``hosts.start("scheduler", argv)`` → Popen."""

    __test__ = False  # a helper, not a test class

    def __init__(self, subnet: int = 0):
        self.tag = uuid.uuid4().hex[:5]
        self.subnet = subnet
        self.netns: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> "TestHosts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, name: str) -> str:
        """A new host; the first one also holds the bridge. Returns its address."""
        ns = f"ff{self.tag}-{name}"[:15]
        index = len(self.netns) + 1
        address = SUBNET.format(self.subnet, index)
        _ip("netns", "add", ns)
        self.netns[name] = ns
        _ip("-n", ns, "link", "set", "lo", "up")
        if index == 1:
            _ip("-n", ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "br0")
            _ip("-n", ns, "link", "set", "br0", "up")
        else:
            hub = self.netns[next(iter(self.netns))]
            outer = f"v{self.tag}{index}"
            _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", outer, "netns", hub)
            _ip("-n", hub, "link", "set", outer, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        self.addresses[name] = address
        return address

    def start(self, host: str, argv: Sequence[str], *, env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen:
        """Start argv inside `host` (own session, output to `log`)."""
        out = open(log, "ab")
        try:
            proc = subprocess.Popen(["ip", "netns", "exec", self.netns[host], *argv], env=env, cwd=cwd, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()
        self.processes.append(proc)
        return proc

    def run(self, host: str, argv: Sequence[str], *, env: dict[str, str], cwd: Path, timeout: float
            ) -> subprocess.CompletedProcess:
        """Run argv inside `host` to its end."""
        return subprocess.run(["ip", "netns", "exec", self.netns[host], *argv], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def pids(self, host: str) -> list[int]:
        """Every process living in `host`'s network namespace."""
        out = subprocess.run(["ip", "netns", "pids", self.netns[host]], capture_output=True, text=True).stdout
        return sorted(int(p) for p in out.split())

    def lose(self, host: str) -> list[int]:
        """The host dies: SIGKILL to every process in it at once. Returns the pids killed."""
        pids = self.pids(host)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.processes:
            if proc.pid in pids:
                proc.wait(timeout=10)
        return pids

    def close(self) -> None:
        for name in self.netns:
            self.lose(name)
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        for ns in reversed(list(self.netns.values())):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.netns.clear()


def wait_for_port(hosts: TestHosts, host: str, address: str, port: int, python: str, timeout: float = 60.0) -> None:
    """Until something listens on address:port, as seen from `host`."""
    probe = f"import socket; socket.create_connection(({address!r}, {port}), timeout=1).close()"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hosts.run(host, [python, "-c", probe], env=dict(os.environ), cwd=Path("/"), timeout=10).returncode == 0:
            return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on {address}:{port} as seen from {host}")
