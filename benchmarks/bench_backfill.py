"""Backfill benchmark: the shape of a real cluster's history loaded at once. 60 nights, about 760
attempts, one kernel log per node beside each job's application log (about 12 k files), the many-files profile
(bench_many_files.MANY_FILES_PROFILE) spread over 60 days. One `firstfault nightly --since D1 --until D2` process over
every night, then the same backfill again with `--force` into the full lake and warehouse, beside `grep -cE` over the
same files.

Prints the fleet's shape and fingerprint, grep's time, then for each run: wall time, CPU seconds of the process tree,
attempts/s (target >= 15 on 2 cores), files/s, the speed as a fraction of grep's, peak RSS of the largest process;
and the second run's wall against the first's (target <= 1.15x: a night's cost must not grow with the history).

    .venv/bin/python benchmarks/bench_backfill.py [--attempts 760] [--dir DIR]

Shares its fleet, grep and run code with bench_fleet.py. Not part of the CI test run.
"""
from __future__ import annotations

import sys
from pathlib import Path

from bench_fleet import ensure_fleet, fingerprint, local_env, log_files, nights, run_nightly
from bench_many_files import MANY_FILES_PROFILE, fleet_main, shape
from measure import grep_seconds

#: MANY_FILES_PROFILE (every keyword of `simulate` spelled out there) over 60 days with 760 first attempts.
BACKFILL_PROFILE = {**MANY_FILES_PROFILE, "attempts": 760, "days": 60}

TARGET_ATTEMPTS_S = 15.0
TARGET_AGAIN_RATIO = 1.15


def main(argv: list[str] | None = None) -> int:
    return fleet_main(argv, __doc__, BACKFILL_PROFILE, "bench-backfill-", run_benchmark)


def run_benchmark(root: Path, profile: dict) -> int:
    fleet = root / "fleet"
    sim_s = ensure_fleet(fleet, profile)
    since, until = nights(fleet, profile)
    attempts, files = profile["attempts"], len(log_files(fleet))
    print(f"fleet: {attempts} attempts, {files:,} files, nights {since} to {until}; {fingerprint(fleet)}; "
          f"{shape(fleet, attempts)}; simulated in {sim_s:.0f} s ({root})", flush=True)
    grep_s = grep_seconds([fleet / "catalog"])
    print(f"grep -cE over the same files: {grep_s:.2f} s ({files / grep_s:,.0f} files/s)", flush=True)
    runs = {}
    for label, again in (("first backfill", False), ("again with --force", True)):
        r = runs[label] = run_nightly(fleet, root / "local", "local", local_env(), since, until, again=again)
        rate = attempts / r["wall_s"]
        print(f"{label}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s (all processes), {rate:.2f} attempts/s "
              f"({'met' if rate >= TARGET_ATTEMPTS_S else 'MISSED'}, target >= {TARGET_ATTEMPTS_S:.0f}), "
              f"{files / r['wall_s']:,.0f} files/s, {grep_s / r['wall_s']:.3f}x grep's speed; peak RSS largest process "
              f"{r['largest_mb']:.0f} MB; attributed {r['attributed']}, failed {r['failed']}, "
              f"confident wrong {r['confident_wrong']}", flush=True)
    ratio = runs["again with --force"]["wall_s"] / runs["first backfill"]["wall_s"]
    print(f"again / first wall: {ratio:.2f}x ({'met' if ratio <= TARGET_AGAIN_RATIO else 'MISSED'}, "
          f"target <= {TARGET_AGAIN_RATIO}x)")
    first = runs["first backfill"]
    return 0 if attempts / first["wall_s"] >= TARGET_ATTEMPTS_S and ratio <= TARGET_AGAIN_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
