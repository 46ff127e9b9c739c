"""The nightly on a Dask cluster of separate hosts, as operators run it: `dask scheduler` and two `dask worker`s each
in a network namespace of its own (tests/netns_hosts.py), the lake and the catalog on S3 (moto's server), a Prefect
server the workers report to, and a driver host that runs `firstfault nightly --runner dask --address …` and writes
the warehouse. Nothing a shard reads is on the driver's disk: the simulated fleet is uploaded to S3 and its local copy
deleted before any run. The rows equal the local runner's on the same inputs; a worker host lost mid-night (every
process in it killed) changes nothing either: the remaining worker finishes, no attempt twice, nothing half-written.

The commands below are the recipe of docs/nightly.md ("A cluster of separate hosts"), in the same order.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import warehouse_rows
from firstfault.synthetic.simulate import simulate
from netns_hosts import TestHosts, namespaces_available, wait_for_port

SINCE, UNTIL = "2026-11-01", "2026-11-02"
# two simulated fleets (one day of starts each): the equality run's, and a small one for the kill runs
FLEETS = {"big": 230, "small": 40}
S3_PORT, PREFECT_PORT, SCHEDULER_PORT = 5000, 4200, 8786
KILL_SEEDS = (1, 2, 3, 4, 5)
# run-specific columns (ids, wall-clock times) are left out; everything else must be equal
COMPARED = {
    "attributions": "SELECT * FROM attributions ORDER BY attempt_id",
    "attribution_evidence": "SELECT * FROM attribution_evidence ORDER BY attempt_id, position",
    "events": "SELECT * FROM events ORDER BY attempt_id, event_id",
    "rule_hits": "SELECT * FROM rule_hits ORDER BY ALL",
    "connector_reports": "SELECT * FROM connector_reports ORDER BY ALL",
}
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

pytestmark = pytest.mark.skipif(bool(namespaces_available()), reason=namespaces_available() or "")


def _host_env(root: Path, s3: str, prefect: str) -> dict[str, str]:
    """A host's own home, temp and Prefect folders; the S3 endpoint and credentials; the Prefect server."""
    for sub in ("home", "tmp", "prefect"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8",
           "PREFECT_HOME": str(root / "prefect"), "PREFECT_API_URL": prefect, "AWS_ENDPOINT_URL": s3,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false", "PREFECT_UI_ENABLED": "false", **S3_ENV}
    return env


class Cluster:
    """The hosts, their addresses and environments, and the driver's config files."""

    def __init__(self, hosts: TestHosts, root: Path):
        self.hosts, self.root = hosts, root
        self.driver = hosts.add("driver")  # holds the bridge; S3 and the Prefect server run here too
        self.scheduler = hosts.add("scheduler")
        self.s3 = f"http://{self.driver}:{S3_PORT}"
        self.prefect = f"http://{self.driver}:{PREFECT_PORT}/api"
        self.address = f"tcp://{self.scheduler}:{SCHEDULER_PORT}"
        self.env = {name: _host_env(root / name, self.s3, self.prefect) for name in ("driver", "scheduler", "w1", "w2")}
        self.workers: dict[str, str] = {}

    def start_worker(self, name: str) -> None:
        if name not in self.workers:
            self.workers[name] = self.hosts.add(name)
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

    def upload_fleet(self, fleet: str, seed: int) -> None:
        """Simulate a fleet on the driver, put its catalog on S3, delete the local copy: shards can only read S3."""
        local = self.root / "driver" / f"fleet-{fleet}"
        simulate(local, nodes=32, attempts=FLEETS[fleet], days=1, seed=seed, lines=(20, 60), max_job_nodes=8)
        up = self.hosts.run("driver", [PYTHON, "-c", UPLOAD, str(local / "catalog"), f"fleet/{fleet}"],
                            env=self.env["driver"], cwd=self.root / "driver" / "home", timeout=300)
        assert up.returncode == 0, up.stderr[-2000:]
        shutil.rmtree(local)

    def nightly(self, fleet: str, run: str, *extra: str) -> subprocess.Popen:
        argv = [PYTHON, "-m", "firstfault.cli", "nightly", "--config", str(self.config(fleet, run)), "--since", SINCE,
                "--until", UNTIL, "--json", *extra]
        return self.hosts.start("driver", argv, env=self.env["driver"], cwd=self.root / "driver" / "home",
                                log=self.root / f"nightly-{run}.log")

    def nightly_dask(self, fleet: str, run: str) -> subprocess.Popen:
        return self.nightly(fleet, run, "--runner", "dask", "--address", self.address, "--shards", "8")

    def finish(self, proc: subprocess.Popen, run: str, timeout: float = 900) -> None:
        rc = proc.wait(timeout=timeout)
        assert rc == 0, (self.root / f"nightly-{run}.log").read_text(errors="replace")[-3000:]

    def rows(self, run: str) -> dict[str, list[dict]]:
        return {t: warehouse_rows(self.root / "driver" / f"{run}.duckdb", q) for t, q in COMPARED.items()}

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("hosts")
    with TestHosts() as hosts:
        c = Cluster(hosts, root)
        drv, home = c.env["driver"], root / "driver" / "home"
        hosts.start("driver", [PYTHON, "-m", "moto.server", "-H", c.driver, "-p", str(S3_PORT)], env=drv, cwd=home,
                    log=root / "s3.log")
        hosts.start("driver", [PYTHON, "-m", "prefect", "server", "start", "--host", c.driver, "--port",
                               str(PREFECT_PORT), "--no-ui"], env=drv, cwd=home, log=root / "prefect.log")
        hosts.start("scheduler", [PYTHON, "-m", "dask", "scheduler", "--host", c.scheduler, "--port", str(SCHEDULER_PORT),
                                  "--no-dashboard"], env=c.env["scheduler"], cwd=root / "scheduler" / "home",
                    log=root / "scheduler.log")
        for name in ("w1", "w2"):
            c.start_worker(name)
        wait_for_port(hosts, "driver", c.driver, S3_PORT, PYTHON)
        wait_for_port(hosts, "driver", c.driver, PREFECT_PORT, PYTHON, timeout=120)
        c.wait_for_workers(2)
        for seed, fleet in enumerate(FLEETS, start=7):
            c.upload_fleet(fleet, seed)
        yield c


def _same_rows(a: dict, b: dict) -> None:
    for table in COMPARED:
        only = sorted(set(map(repr, a[table])) ^ set(map(repr, b[table])))
        assert a[table] and a[table] == b[table], (table, len(a[table]), len(b[table]), only[:4])


def test_nightly_on_separate_hosts_equals_local(cluster):
    rows, lake = cluster.local_reference("big")
    assert len(rows["attributions"]) == FLEETS["big"]  # every attempt of the fleet ended on the two nights
    cluster.finish(cluster.nightly_dask("big", "dask"), "dask")
    _same_rows(rows, cluster.rows("dask"))
    assert cluster.lake_inventory("big") == lake and not lake["results"]
    for worker in ("w1", "w2"):  # both worker hosts ran shards
        assert "Task run 'nightly-shard" in (cluster.root / f"{worker}.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def small_reference(cluster):
    return cluster.local_reference("small")


@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_a_worker_host_lost_mid_night_changes_nothing(cluster, small_reference, seed):
    rows, lake = small_reference
    cluster.wait_for_workers(2)
    run = f"kill-{seed}"
    log = cluster.root / "w1.log"
    finished = log.read_text(errors="replace").count("Task run 'nightly-shard")
    proc = cluster.nightly_dask("small", run)
    # the seeded kill point: once w1 finished its first shard of the night (it holds the next), a seeded delay more
    deadline = time.monotonic() + 300
    while log.read_text(errors="replace").count("Task run 'nightly-shard") == finished:
        assert proc.poll() is None and time.monotonic() < deadline, "no shard finished on worker w1"
        time.sleep(0.2)
    time.sleep(random.Random(seed).uniform(0.0, 2.0))
    assert proc.poll() is None, "the night ended before the kill point"
    assert cluster.hosts.lose("w1")
    cluster.finish(proc, run)
    _same_rows(rows, cluster.rows(run))
    assert cluster.lake_inventory("small") == lake  # no attempt twice, nothing half-written, no results left
    cluster.start_worker("w1")  # the host comes back for the next kill point
