"""The nightly on a Dask cluster of separate hosts (tests/netns_hosts.py: each host a network namespace, the lake and
the catalog on S3 served by moto's server on the driver host) against the local runner on the same fleet: attempts/s
with the local runner, with two worker hosts and with one, beside `grep -cE` over the same log files.

    .venv/bin/python benchmarks/bench_dask_hosts.py [--attempts 230]     # as root (ip netns)

Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from measure import grep_seconds  # noqa: E402
from netns_hosts import DaskHosts, TestHosts, namespaces_available  # noqa: E402

from firstfault.synthetic.simulate import simulate  # noqa: E402


def timed(hosts: DaskHosts, run: str, start) -> float:
    started = time.perf_counter()
    hosts.finish(start(), run)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=230)
    args = ap.parse_args(argv)
    why = namespaces_available()
    if why:
        print(f"cannot run: {why}")
        return 2
    with tempfile.TemporaryDirectory() as tmp, TestHosts() as netns:
        root = Path(tmp)
        grep_copy = root / "grep-copy"  # the same bytes, for grep: the fleet itself lives on S3 only
        simulate(grep_copy, nodes=32, attempts=args.attempts, days=1, seed=7, lines=(20, 60), max_job_nodes=8)
        grep_s = grep_seconds([grep_copy / "catalog"])
        hosts = DaskHosts(netns, root)
        hosts.start()
        hosts.upload_fleet("bench", args.attempts, 7)
        walls = {"local": timed(hosts, "local", lambda: hosts.nightly("bench", "local", "--prefect", "never")),
                 "dask, 2 worker hosts": timed(hosts, "dask2", lambda: hosts.nightly_dask("bench", "dask2"))}
        netns.lose("w2")
        walls["dask, 1 worker host"] = timed(hosts, "dask1", lambda: hosts.nightly_dask("bench", "dask1"))
    print(f"grep -cE over the same files: {grep_s:.3f} s")
    for runner, wall in walls.items():
        print(f"{runner:22} {wall:7.1f} s  {args.attempts / wall:6.2f} attempts/s  {wall / walls['local']:.2f}x local")
    return 0


if __name__ == "__main__":
    sys.exit(main())
