"""Many-files benchmark: the nightly backfill (local runner) over a fleet shaped like real clusters' logs, many small
files: jobs of 8-64 nodes, one kernel log per node of about 20 KB, beside the job's application log (about 15 files
and 0.3 MB per attempt), from the pinned simulator profile MANY_FILES_PROFILE. One `firstfault nightly --since D1
--until D2` process over every night, beside `grep -cE` over the same files.

Prints the fleet's shape (files per attempt, median file size, MB per attempt) and fingerprint, then wall time, CPU
seconds of the process tree, attempts/s (target of issue #22: >= 15 on 2 cores), files/s, the speed as a fraction of
grep's, peak RSS of the largest process, and `evaluate`'s accuracy of the warehouse (simulated truth).

    .venv/bin/python benchmarks/bench_many_files.py [--attempts 500] [--dir DIR]

With FIRSTFAULT_STAGE_CPU=FILE set, the run writes its CPU seconds per landing stage there (firstfault/stages.py).
Shares its fleet, grep and run code with bench_fleet.py. Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_fleet import FLEET_PROFILE, ensure_fleet, fingerprint, local_env, log_files, nights, run_nightly
from measure import grep_seconds

#: Every keyword of `simulate` spelled out (tests/test_benchmarks.py checks none is missing), as FLEET_PROFILE does:
#: its fault mix, jobs of 8-64 nodes (about 14 on average), each node's kernel log padded to about 20 KB with benign
#: system chatter, a short application log; no app padding, metrics or requeues. --attempts scales only `attempts`.
MANY_FILES_PROFILE = {
    "nodes": 256,
    "attempts": 500,
    "days": 7,
    "seed": 0,
    "lines": (40, 300),
    "lemons": 2,
    "lemon_share": 0.25,
    "bad_port_share": 0.5,
    "weights": FLEET_PROFILE["weights"],
    "pad_bytes": 0,
    "max_job_nodes": 0,
    "metrics": False,
    "requeue_share": 0.0,
    "job_sizes": {8: 50, 12: 20, 16: 15, 24: 8, 32: 4, 64: 3},
    "kernel_pad_bytes": 19_000,
}

TARGET_ATTEMPTS_S = 15.0


def shape(fleet: Path, attempts: int) -> str:
    """Files and bytes per attempt and the median file size: what makes the profile real-shaped."""
    sizes = [p.stat().st_size for p in log_files(fleet)]
    return (f"{len(sizes) / attempts:.1f} files and {sum(sizes) / attempts / 1e6:.2f} MB per attempt, median file "
            f"{statistics.median(sizes) / 1e3:.1f} KB")


def main(argv: list[str] | None = None) -> int:
    return fleet_main(argv, __doc__, MANY_FILES_PROFILE, "bench-many-files-", run_benchmark)


def fleet_main(argv: list[str] | None, doc: str, profile: dict, prefix: str, run) -> int:
    """The command line of a benchmark over a simulated fleet: --attempts and --dir, then `run(root, profile)`."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--attempts", type=int, default=profile["attempts"], help="attempts of the fleet")
    ap.add_argument("--dir", help="work folder; a fleet simulated there is reused (default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    root = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix=prefix))
    try:
        return run(root, {**profile, "attempts": args.attempts})
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


def run_benchmark(root: Path, profile: dict) -> int:
    fleet = root / "fleet"
    sim_s = ensure_fleet(fleet, profile)
    since, until = nights(fleet, profile)
    attempts, files = profile["attempts"], len(log_files(fleet))
    print(f"fleet: {attempts} attempts, nights {since} to {until}; {fingerprint(fleet)}; {shape(fleet, attempts)}; "
          f"simulated in {sim_s:.0f} s ({root})", flush=True)
    grep_s = grep_seconds([fleet / "catalog"])
    print(f"grep -cE over the same files: {grep_s:.2f} s ({files / grep_s:,.0f} files/s)", flush=True)
    r = run_nightly(fleet, root / "local", "local", local_env(), since, until)
    rate = attempts / r["wall_s"]
    meets = rate >= TARGET_ATTEMPTS_S and r["confident_wrong"] == 0
    print(f"\nlocal nightly: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s (all processes), "
          f"{rate:.2f} attempts/s ({'met' if rate >= TARGET_ATTEMPTS_S else 'MISSED'}, target >= {TARGET_ATTEMPTS_S:.0f}), "
          f"{files / r['wall_s']:,.0f} files/s, {grep_s / r['wall_s']:.3f}x grep's speed, "
          f"CPU {1e3 * r['cpu_s'] / files:.1f} ms per file")
    print(f"peak RSS largest process {r['largest_mb']:.0f} MB, all {r['total_mb']:.0f} MB; attributed {r['attributed']}, "
          f"failed {r['failed']}")
    print(f"accuracy: domain {r['domain']:.1%}, culprit {r['culprit']:.1%}, verdict {r['verdict']:.1%}, "
          f"confident wrong {r['confident_wrong']} (target 0)")
    return 0 if meets else 1


if __name__ == "__main__":
    sys.exit(main())
