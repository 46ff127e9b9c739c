"""Separate test hosts on one machine: network namespaces on a private subnet, joined by a bridge.

Each host is a network namespace of its own (``ip netns``) with one address on the test subnet; the first host holds
the bridge the others' veth pairs plug into, so no address of the test subnet lives in the machine's own namespace
and no test traffic leaves the namespaces this module made. Processes are started in a host with ``ip netns exec``,
in a session of their own so that a host can be lost whole (every process in it killed at once). ``close`` kills what
is left and deletes the namespaces (also after a failed test: use it as a context manager).

``DaskHosts`` puts a firstfault deployment on such hosts: a driver (which also serves S3 with moto's server and runs
the Prefect server), a `dask scheduler` and `dask worker` hosts; the fleet on S3 only, the driver's runs and what
they left in the warehouse and the lake. Used by tests/test_dask_hosts.py and benchmarks/bench_dask_hosts.py.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from conftest import RUNNER_TABLES, warehouse_rows
from firstfault.synthetic.simulate import simulate

SUBNET = "10.250.{}.{}"  # a private subnet that only exists inside the namespaces of one test run


def namespaces_available() -> str | None:
    """None when network namespaces can be made here, else why not (a test skips with that reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian package iproute2)"
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


SINCE, UNTIL = "2026-11-01", "2026-11-02"
S3_PORT, PREFECT_PORT, SCHEDULER_PORT = 5000, 4200, 8786
PYTHON = sys.executable
# what a shard may read: the lake and the catalog on S3, through the AWS environment every host gets
S3_ENV = {"AWS_ACCESS_KEY_ID": "firstfault", "AWS_SECRET_ACCESS_KEY": "firstfault-test", "AWS_DEFAULT_REGION": "us-east-1"}

# Objects per lake table and attempt, and what is left under results/: one listing of the lake on S3 from the driver.
LAKE_INVENTORY = """
import collections, json, sys, s3fs
root = sys.argv[1]
files = s3fs.S3FileSystem().find(root)
parts = collections.Counter()
for f in files:
    rel = f[len(root) + 1:].split("/")
    if rel[0] != "results":
        parts["/".join(rel[:3])] += 1
json.dump({"objects": parts, "results": [f for f in files if f.startswith(root + "/results/")]}, sys.stdout)
"""
UPLOAD = """
import s3fs, sys
fs = s3fs.S3FileSystem()
for bucket in ("lake", "fleet"):
    if not fs.exists(bucket):
        fs.mkdir(bucket)
fs.put(sys.argv[1], sys.argv[2], recursive=True)
"""

def _host_env(root: Path, s3: str, prefect: str) -> dict[str, str]:
    """A host's own home, temp and Prefect folders; the S3 endpoint and credentials; the Prefect server."""
    for sub in ("home", "tmp", "prefect"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8",
           "PREFECT_HOME": str(root / "prefect"), "PREFECT_API_URL": prefect, "AWS_ENDPOINT_URL": s3,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false", "PREFECT_UI_ENABLED": "false", **S3_ENV}
    return env


class DaskHosts:
    """A driver (S3 and the Prefect server too), a Dask scheduler and worker hosts; the driver's config files."""

    def __init__(self, hosts: TestHosts, root: Path):
        self.hosts, self.root = hosts, root
        self.driver = hosts.add("driver")  # holds the bridge; S3 and the Prefect server run here too
        self.scheduler = hosts.add("scheduler")
        self.s3 = f"http://{self.driver}:{S3_PORT}"
        self.prefect = f"http://{self.driver}:{PREFECT_PORT}/api"
        self.address = f"tcp://{self.scheduler}:{SCHEDULER_PORT}"
        self.env = {name: _host_env(root / name, self.s3, self.prefect) for name in ("driver", "scheduler")}
        self.workers: dict[str, str] = {}

    def start(self, workers: Sequence[str] = ("w1", "w2")) -> None:
        """S3 and the Prefect server on the driver, the scheduler, the workers; returns once all are up."""
        drv, home, root = self.env["driver"], self.root / "driver" / "home", self.root
        self.hosts.start("driver", [PYTHON, "-m", "moto.server", "-H", self.driver, "-p", str(S3_PORT)], env=drv,
                         cwd=home, log=root / "s3.log")
        self.hosts.start("driver", [PYTHON, "-m", "prefect", "server", "start", "--host", self.driver, "--port",
                                    str(PREFECT_PORT), "--no-ui"], env=drv, cwd=home, log=root / "prefect.log")
        self.hosts.start("scheduler", [PYTHON, "-m", "dask", "scheduler", "--host", self.scheduler, "--port",
                                       str(SCHEDULER_PORT), "--no-dashboard"], env=self.env["scheduler"],
                         cwd=root / "scheduler" / "home", log=root / "scheduler.log")
        for name in workers:
            self.start_worker(name)
        wait_for_port(self.hosts, "driver", self.driver, S3_PORT, PYTHON)
        wait_for_port(self.hosts, "driver", self.driver, PREFECT_PORT, PYTHON, timeout=120)
        self.wait_for_workers(len(workers))

    def start_worker(self, name: str) -> None:
        """A worker host (made on first use) and its `dask worker`: one thread, its own temp folder."""
        if name not in self.workers:
            self.workers[name] = self.hosts.add(name)
            self.env[name] = _host_env(self.root / name, self.s3, self.prefect)
        self.hosts.start(name, [PYTHON, "-m", "dask", "worker", self.address, "--nthreads", "1", "--nworkers", "1",
                                "--host", self.workers[name], "--name", name, "--no-dashboard",
                                "--local-directory", str(self.root / name / "tmp")],
                         env=self.env[name], cwd=self.root / name / "home", log=self.root / f"{name}.log")

    def wait_for_workers(self, n: int, timeout: float = 60.0) -> None:
        probe = ("from distributed import Client; c = Client(%r, timeout=20); "
                 "c.wait_for_workers(%d, timeout=%f); c.close()" % (self.address, n, timeout))
        out = self.hosts.run("driver", [PYTHON, "-c", probe], env=self.env["driver"], cwd=self.root / "driver" / "home",
                             timeout=timeout + 30)
        assert out.returncode == 0, out.stderr[-2000:]

    def config(self, fleet: str, run: str) -> Path:
        """The driver's config for one run over `fleet`: its lake and catalog on S3, a warehouse file of the run's own."""
        path = self.root / "driver" / f"{run}.toml"
        path.write_text(f'[lake]\nroot = "s3://lake/{fleet}"\nendpoint_url = "{self.s3}"\n'
                        f'key = "{S3_ENV["AWS_ACCESS_KEY_ID"]}"\nsecret = "{S3_ENV["AWS_SECRET_ACCESS_KEY"]}"\n'
                        f'region = "us-east-1"\n[warehouse]\npath = "{self.root / "driver" / f"{run}.duckdb"}"\n'
                        f'[catalog]\npaths = ["s3://fleet/{fleet}"]\n')
        return path

    def upload_fleet(self, fleet: str, attempts: int, seed: int) -> None:
        """Simulate a fleet on the driver, put its catalog on S3, delete the local copy: shards can only read S3."""
        local = self.root / "driver" / f"fleet-{fleet}"
        simulate(local, nodes=32, attempts=attempts, days=1, seed=seed, lines=(20, 60), max_job_nodes=8)
        up = self.hosts.run("driver", [PYTHON, "-c", UPLOAD, str(local / "catalog"), f"fleet/{fleet}"],
                            env=self.env["driver"], cwd=self.root / "driver" / "home", timeout=300)
        assert up.returncode == 0, up.stderr[-2000:]
        shutil.rmtree(local)

    def nightly(self, fleet: str, run: str, *extra: str) -> subprocess.Popen:
        argv = [PYTHON, "-m", "firstfault.cli", "nightly", "--config", str(self.config(fleet, run)), "--since", SINCE,
                "--until", UNTIL, "--json", *extra]
        return self.hosts.start("driver", argv, env=self.env["driver"], cwd=self.root / "driver" / "home",
                                log=self.root / f"nightly-{run}.log")

    def nightly_dask(self, fleet: str, run: str, shards: int = 8) -> subprocess.Popen:
        return self.nightly(fleet, run, "--runner", "dask", "--address", self.address, "--shards", str(shards))

    def finish(self, proc: subprocess.Popen, run: str, timeout: float = 900) -> None:
        rc = proc.wait(timeout=timeout)
        assert rc == 0, (self.root / f"nightly-{run}.log").read_text(errors="replace")[-3000:]

    def rows(self, run: str) -> dict[str, list[dict]]:
        return {t: warehouse_rows(self.root / "driver" / f"{run}.duckdb", q) for t, q in RUNNER_TABLES.items()}

    def lake_inventory(self, fleet: str) -> dict:
        """Objects per lake table partition, and what is left under results/."""
        out = self.hosts.run("driver", [PYTHON, "-c", LAKE_INVENTORY, f"lake/{fleet}"], env=self.env["driver"],
                             cwd=self.root / "driver" / "home", timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)

    def local_reference(self, fleet: str) -> tuple[dict, dict]:
        """The local runner's rows and lake on the same inputs."""
        self.finish(self.nightly(fleet, f"local-{fleet}", "--prefect", "never"), f"local-{fleet}")
        return self.rows(f"local-{fleet}"), self.lake_inventory(fleet)
