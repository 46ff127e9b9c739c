"""The nightly on a Dask cluster of separate hosts, as operators run it: `dask scheduler` and two `dask worker`s each
in a network namespace of its own (tests/netns_hosts.py), the lake and the catalog on S3 (moto's server), a Prefect
server the workers report to, and a driver host that runs `firstfault nightly --runner dask --address …` and writes
the warehouse. Nothing a shard reads is on the driver's disk: the simulated fleet is uploaded to S3 and its local copy
deleted before any run. The rows equal the local runner's on the same inputs; a worker host lost mid-night (every
process in it killed) changes nothing either: the remaining worker finishes, no attempt twice, nothing half-written.

The commands below are the recipe of docs/nightly.md ("A cluster of separate hosts"), in the same order.
"""
from __future__ import annotations

import random
import time

import pytest

from conftest import RUNNER_TABLES
from netns_hosts import DaskHosts, TestHosts, namespaces_available

# two simulated fleets (one day of starts each): the equality run's, and a small one for the kill runs
FLEETS = {"big": 150, "small": 24}
KILL_SEEDS = (1, 2, 3)

pytestmark = pytest.mark.skipif(bool(namespaces_available()), reason=namespaces_available() or "")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with TestHosts() as hosts:
        c = DaskHosts(hosts, tmp_path_factory.mktemp("hosts"))
        c.start()
        for seed, (fleet, attempts) in enumerate(FLEETS.items(), start=7):
            c.upload_fleet(fleet, attempts, seed)
        yield c


def _same_rows(a: dict, b: dict) -> None:
    for table in RUNNER_TABLES:
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
