"""The Slurm epilog's cost: `firstfault epilog` as slurmctld runs it (a whole process, the job in its environment),
for a burst of failed jobs, beside `python -c pass` (the interpreter's own start-up) on the same machine.

    .venv/bin/python benchmarks/bench_epilog.py [--calls 50]

Prints the wall seconds of each (minimum, median, slowest) and the epilog's CPU seconds per call, checks that every
call queued its file, and exits 1 when the slowest call takes a second or more (docs/automation.md: the epilog
returns within a second). Not part of the test run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from measure import measured_run


def _spread(seconds: list[float]) -> str:
    return f"min {min(seconds):.3f} s, median {statistics.median(seconds):.3f} s, slowest {max(seconds):.3f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-epilog-") as tmp:
        config = Path(tmp) / "firstfault.toml"
        config.write_text(f'[automation]\nspool_dir = "{Path(tmp) / "spool"}"\n', encoding="utf-8")
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        epilog, bare = [], []
        for call in range(args.calls):
            env = {**base, "SLURM_JOB_ID": str(1000 + call), "SLURM_JOB_EXIT_CODE2": "1:0", "SLURM_JOB_DERIVED_EC": "0",
                   "SLURM_JOB_EXIT_CODE": "256", "SLURM_CLUSTER_NAME": "bench"}
            epilog.append(measured_run([sys.executable, "-m", "firstfault.cli", "epilog", "--config", str(config)], env))
            bare.append(measured_run([sys.executable, "-c", "pass"], base))
        queued = len(list((Path(tmp) / "spool" / "queue").glob("*.json")))
    walls = [m.wall_s for m in epilog]
    print(f"{args.calls} epilog calls: {_spread(walls)}; CPU {statistics.median(m.cpu_s for m in epilog):.3f} s per call "
          f"(median); {queued} files queued")
    print(f"python -c pass beside them: {_spread([m.wall_s for m in bare])}")
    print(f"epilog / interpreter start-up (medians): {statistics.median(walls) / statistics.median(m.wall_s for m in bare):.1f}x")
    return 0 if max(walls) < 1.0 and queued == args.calls else 1


if __name__ == "__main__":
    sys.exit(main())
