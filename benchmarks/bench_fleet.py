"""Fleet benchmark: the nightly backfill over a simulated fleet (2,000 attempts, 2 GB of logs by default, from the
pinned simulator profile FLEET_PROFILE), once with the local runner and once with `--runner dask` (a local Dask
cluster of 2 worker processes, through Prefect), each as ONE `firstfault nightly --since D1 --until D2` process over
every night, on separate lakes and warehouses, beside `grep -cE` over the same log files.

Prints, side by side with the targets of issue #12: wall time, CPU seconds of all processes, attempts/s, MB/s (log
bytes / wall), the speed as a fraction of grep's, peak RSS of the largest process and of the whole process tree (sampled: Dask workers and the
local runner's shard processes included), the Dask/local wall ratio, and `evaluate`'s accuracy of each warehouse.

Then the flat-memory check (skip it with --no-flat): the local nightly again over the same attempts with 4x the log
volume (more padding), and over a fleet whose log bytes are 95 % progress lines (Megatron iteration lines); exit 1
when either's peak RSS (largest process) exceeds 1.1x the base run's.

    .venv/bin/python benchmarks/bench_fleet.py [--attempts 2000] [--gb 2.0] [--dir DIR] [--no-flat]

With --history it measures instead whether a run's cost grows with what the lake and warehouse already hold: the
local nightly over every night, then the same backfill again with --force into that full lake and warehouse; it
prints the CPU seconds of each run's process tree and their ratio (target <= 1.15x; exit 1 when missed).

    .venv/bin/python benchmarks/bench_fleet.py --history [--attempts 200] [--gb 0.2] [--dir DIR]

Not part of the CI test run. The Dask run goes through one Prefect server started by the script (as `firstfault serve`
runs under a server in production); its start-up is printed, not counted.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path

import yaml
from measure import FLAT_LIMIT, grep_seconds, measured_run, memory_is_flat

from firstfault.synthetic.logwriters import GPUS, megatron_iteration_line
from firstfault.synthetic.simulate import evaluate, read_truth, simulate

#: The simulator input of this benchmark with EVERY keyword of `simulate` spelled out (tests/test_benchmarks.py
#: checks none is missing), so that later simulator changes, which add their switches off by default, cannot change
#: what is measured. The fault weights are written out for every kind, the real and catalogue shapes off (the mix of
#: the Llama 3 table); no job size cap, no metrics files, no requeued attempts. --attempts and --gb scale only `attempts` and
#: `pad_bytes` (see sized_profile). A change of the simulator's random streams still shows in the printed fingerprint.
FLEET_PROFILE = {
    "nodes": 256,
    "attempts": 2000,
    "days": 7,
    "seed": 0,
    "lines": (150, 1500),
    "lemons": 2,
    "lemon_share": 0.25,
    "bad_port_share": 0.5,
    "weights": {
        "success": 400, "time_limit": 45, "cancelled": 25, "gpu_lost": 48, "gpu_nvlink": 38, "gpu_firmware": 24,
        "gpu_memory": 54, "ib_link": 21, "nic": 5, "node_failure": 12, "preemption": 8, "nccl_segfault": 16,
        "exception": 30, "cuda_oom": 30, "collective_mismatch": 12, "watchdog_unknown": 12, "ambiguous": 15,
        "host_oom": 0, "filesystem": 0, "kernel_panic": 0, "nan": 0, "node_vanished": 0, "catalogue": 0,
    },
    "pad_bytes": 880_000,  # 2 GB over 2,000 attempts
    "max_job_nodes": 0,
    "metrics": False,
    "requeue_share": 0.0,
    "job_sizes": None,
    "kernel_pad_bytes": 0,
}
#: what the profile's attempts write unpadded, on average (256 nodes); padding brings an attempt to its share of --gb
UNPADDED_BYTES_PER_ATTEMPT = 120_000
PROGRESS_SHARE = 0.95
#: a progress line: the simulator's glog iteration lines and Megatron's training_log lines
PROGRESS_LINE = re.compile(rb"\] iteration +\d")
MEGATRON_LINE_BYTES = 360  # megatron_iteration_line with a 3-digit rank

TARGET_MB_S = 40.0
TARGET_ATTEMPTS_S = 30.0
TARGET_PEAK_MB = 1000.0  # per process
TARGET_DASK_RATIO = 1.3
TARGET_HISTORY_RATIO = 1.15  # CPU of the forced re-run into the full lake and warehouse against the first run's

FIRSTFAULT = [sys.executable, "-c", "import sys; from firstfault.cli import main; sys.exit(main())"]


def sized_profile(attempts: int, gb: float) -> dict:
    """FLEET_PROFILE with `attempts` attempts padded to about `gb` GB of logs in all."""
    pad = max(0, int(gb * 1e9 / attempts) - UNPADDED_BYTES_PER_ATTEMPT)
    return {**FLEET_PROFILE, "attempts": attempts, "pad_bytes": pad}


def ensure_fleet(folder: Path, profile: dict, progress_bytes: int = 0) -> float:
    """Simulate `profile` into `folder` (with `progress_bytes` > 0: unpadded, then topped up with progress lines to
    that volume); return the seconds it took. A fleet made from the same input in --dir is reused (2 GB take minutes)."""
    stamp = json.dumps({"profile": profile, "progress_bytes": progress_bytes}, sort_keys=True)
    if (folder / "input.json").exists() and (folder / "input.json").read_text() == stamp:
        return 0.0
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    simulate(folder, **profile)
    if progress_bytes:
        add_progress_logs(folder, progress_bytes)
    (folder / "input.json").write_text(stamp)
    return time.perf_counter() - started


def log_files(fleet: Path) -> list[Path]:
    return sorted((fleet / "catalog").rglob("*.log"))


def fingerprint(fleet: Path) -> str:
    """What makes two runs comparable: the same files, bytes and injected truth."""
    files = log_files(fleet)
    truth = hashlib.sha256((fleet / "truth.jsonl").read_bytes()).hexdigest()[:16]
    return f"{len(files)} log files, {sum(p.stat().st_size for p in files):,} bytes, truth.jsonl sha256 {truth}"


def log_bytes(fleet: Path) -> int:
    return sum(p.stat().st_size for p in log_files(fleet))


def progress_line_bytes(fleet: Path) -> int:
    return sum(len(line) for p in log_files(fleet) for line in p.read_bytes().splitlines(keepends=True)
               if PROGRESS_LINE.search(line))


def other_line_bytes(fleet: Path) -> int:
    return log_bytes(fleet) - progress_line_bytes(fleet)


def add_progress_logs(fleet: Path, total_bytes: int) -> None:
    """Give every attempt a training log of Megatron iteration lines that brings the fleet to about `total_bytes`."""
    specs = sorted((fleet / "catalog").glob("*/*/attempt.yaml"))
    lines = int((total_bytes - log_bytes(fleet)) / len(specs) / MEGATRON_LINE_BYTES)
    for spec in specs:
        write_megatron_log(spec, lines)


def progress_profile(root: Path, attempts: int, gb: float, base_fleet: Path) -> dict:
    """The profile whose lines other than progress lines make (1 - PROGRESS_SHARE) of the base's volume, so that
    Megatron lines topping it up to that volume make PROGRESS_SHARE of it. The share of padding bytes that are not
    progress lines is measured between the base fleet and the same attempts unpadded (the same faults: padding
    draws from its own random stream)."""
    unpadded = sized_profile(attempts, 0)
    ensure_fleet(root / "flat" / "unpadded", unpadded)
    unpadded_other = other_line_bytes(root / "flat" / "unpadded")
    padded_other = other_line_bytes(base_fleet)
    other_per_pad_byte = (padded_other - unpadded_other) / (sized_profile(attempts, gb)["pad_bytes"] * attempts)
    wanted_other = (1 - PROGRESS_SHARE) * log_bytes(base_fleet)
    return {**unpadded, "pad_bytes": max(0, int((wanted_other - unpadded_other) / other_per_pad_byte / attempts))}


def write_megatron_log(spec: Path, lines: int) -> None:
    """`lines` iteration lines from the last rank (the one Megatron prints on), over the first 45 % of the attempt
    (its injected fault falls at 50-90 %), as a second application log beside the srun output (`app/*.log`)."""
    attempt = yaml.safe_load(spec.read_text())
    start, end = (datetime.fromisoformat(attempt[k]) for k in ("start", "end"))
    step = (end - start) * 0.45 / max(lines, 1)
    rank = len(attempt["nodes"]) * GPUS - 1
    rng = random.Random(spec.parent.name)
    with open(spec.parent / "app" / "megatron.log", "w") as f:
        for i in range(lines):
            f.write(megatron_iteration_line(rank, i + 1, start + step * i, rng))


def nights(fleet: Path, profile: dict) -> tuple[str, str]:
    """--since and --until covering every attempt: attempts start over `days` days and end up to 4 h later."""
    first = min(date.fromisoformat(Path(t["spec"]).parts[1]) for t in read_truth(fleet))
    return first.isoformat(), (first + timedelta(days=profile["days"])).isoformat()


def local_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)
    return env


@contextmanager
def prefect_server(home: Path) -> Iterator[tuple[dict[str, str], float]]:
    """A Prefect server for the Dask run, as `firstfault serve` runs under one in production (otherwise the run would
    start a temporary server of its own). Yields the env that points at it and its start-up time."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**local_env(), "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/api"
        wait_for_health(server, url, started)
        yield {**env, "PREFECT_API_URL": url}, time.perf_counter() - started
    finally:
        server.terminate()
        server.wait()


def wait_for_health(server: subprocess.Popen, url: str, started: float) -> None:
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return
        except OSError:
            if server.poll() is not None or time.perf_counter() - started > 120:
                raise SystemExit("prefect server did not start") from None
            time.sleep(0.5)


def run_nightly(fleet: Path, out: Path, runner: str, env: dict[str, str], since: str, until: str, again: bool = False) -> dict:
    """One `firstfault nightly --since --until` process over the whole range, on its own lake and warehouse (with
    `again`: the ones an earlier run filled, every attempt redone with --force); its wall time, memory, summed night
    summaries and the warehouse's accuracy."""
    if not again:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    cmd = [*FIRSTFAULT, "nightly", "--since", since, "--until", until, "--catalog", str(fleet / "catalog"),
           "--lake", str(out / "lake"), "--warehouse", str(out / "wh.duckdb"), "--json", "--runner", runner,
           "--prefect", "never" if runner == "local" else "always", *(["--force"] if again else [])]
    run = measured_run(cmd, env)
    summaries = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    score = evaluate(fleet, out / "wh.duckdb")
    return {"wall_s": run.wall_s, "cpu_s": run.cpu_s, "largest_mb": run.largest_mb, "total_mb": run.total_mb,
            "attributed": sum(s["attributed"] for s in summaries), "failed": sum(s["failed"] for s in summaries),
            "domain": score["domain_accuracy"], "culprit": score["culprit_accuracy"], "verdict": score["verdict_accuracy"],
            "confident_wrong": score["confident_wrong"]}


#: the table's rows: label, figure, format, target as shown, whether a value meets the target
ROWS = [
    ("wall s", "wall_s", "{:.1f}", "", None),
    ("CPU s, all processes", "cpu_s", "{:.1f}", "", None),
    ("attempts/s", "attempts_s", "{:.2f}", f">= {TARGET_ATTEMPTS_S:.0f}", lambda v: v >= TARGET_ATTEMPTS_S),
    ("MB/s", "mb_s", "{:.2f}", f">= {TARGET_MB_S:.0f}", lambda v: v >= TARGET_MB_S),
    ("speed / grep's", "of_grep", "{:.3f}x", "", None),
    ("peak RSS largest MB", "largest_mb", "{:.0f}", f"<= {TARGET_PEAK_MB:.0f} per process", lambda v: v <= TARGET_PEAK_MB),
    ("peak RSS all MB", "total_mb", "{:.0f}", "", None),
    ("attributed", "attributed", "{}", "", None),
    ("failed", "failed", "{}", "", None),
    ("domain accuracy", "domain", "{:.1%}", "", None),
    ("culprit accuracy", "culprit", "{:.1%}", "", None),
    ("verdict accuracy", "verdict", "{:.1%}", "", None),
    ("confident wrong", "confident_wrong", "{}", "0", lambda v: v == 0),
    ("dask / local wall", "of_local", "{:.2f}x", f"<= {TARGET_DASK_RATIO}x", lambda v: v <= TARGET_DASK_RATIO),
]


def with_rates(results: dict[str, dict], attempts: int, total_bytes: int, grep_s: float) -> dict[str, dict]:
    """Each runner's run with its throughputs, its speed as a fraction of grep's, and (Dask) its wall against local's."""
    rated = {runner: {**r, "attempts_s": attempts / r["wall_s"], "mb_s": total_bytes / 1e6 / r["wall_s"],
                      "of_grep": grep_s / r["wall_s"]} for runner, r in results.items()}
    rated["dask"]["of_local"] = results["dask"]["wall_s"] / results["local"]["wall_s"]
    return rated


def cell(value, fmt: str, meets) -> str:
    if value is None:
        return "n/a"
    return fmt.format(value) + ("" if meets is None else " met" if meets(value) else " MISSED")


def print_runners(rated: dict[str, dict]) -> None:
    """The runners side by side, each figure beside its target."""
    print(f"\n{'':<22} {'local':>16} {'dask':>16}   target")
    for label, figure, fmt, target, meets in ROWS:
        local, dask = (cell(rated[runner][figure], fmt, meets) if figure in rated[runner] else ""
                       for runner in ("local", "dask"))
        print(f"{label:<22} {local:>16} {dask:>16}   {target}")


def check_flat(root: Path, attempts: int, gb: float, base: dict, since: str, until: str) -> bool:
    """The local nightly over the same attempts at 4x the volume and with 95 % progress lines (at the base's volume),
    against the base run's peak memory."""
    base_fleet = root / "fleet"
    variants = {"4x volume": (sized_profile(attempts, 4 * gb), 0),
                f"{100 * PROGRESS_SHARE:.0f} % progress": (progress_profile(root, attempts, gb, base_fleet),
                                                           log_bytes(base_fleet))}
    peaks = {}
    for name, (variant, progress_bytes) in variants.items():
        fleet = root / "flat" / name.replace(" ", "-").replace("%", "pct")
        sim_s = ensure_fleet(fleet, variant, progress_bytes)
        share = progress_line_bytes(fleet) / log_bytes(fleet)
        print(f"{name}: {fingerprint(fleet)} ({100 * share:.0f} % progress lines); simulated in {sim_s:.0f} s", flush=True)
        r = run_nightly(fleet, fleet.parent / f"{fleet.name}-local", "local", local_env(), since, until)
        print(f"  local {r['wall_s']:.1f} s, {log_bytes(fleet) / 1e6 / r['wall_s']:.1f} MB/s, peak RSS largest "
              f"{r['largest_mb']:.0f} MB, all {r['total_mb']:.0f} MB, failed {r['failed']}", flush=True)
        peaks[name] = r["largest_mb"]
    return memory_is_flat(base["largest_mb"], peaks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attempts", type=int, default=FLEET_PROFILE["attempts"], help="attempts of the fleet")
    ap.add_argument("--gb", type=float, default=2.0, help="total log volume to reach by padding (GB, 1e9 bytes)")
    ap.add_argument("--dir", help="work folder; fleets simulated there are reused (default: a temporary folder, removed)")
    ap.add_argument("--no-flat", action="store_true",
                    help=f"skip the flat-memory check (4x volume, {100 * PROGRESS_SHARE:.0f} %% progress lines)")
    ap.add_argument("--history", action="store_true",
                    help=f"only the flat-with-history check: the backfill again with --force into the full lake and warehouse "
                         f"(CPU within {TARGET_HISTORY_RATIO}x of the first run)")
    args = ap.parse_args(argv)
    if sized_profile(args.attempts, args.gb)["pad_bytes"] == 0:
        ap.error(f"--gb too small: under {UNPADDED_BYTES_PER_ATTEMPT / 1e3:.0f} KB per attempt the fleet has no padding")
    root = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        if args.history:
            return run_history(root, args.attempts, args.gb)
        return run_benchmark(root, args.attempts, args.gb, flat=not args.no_flat)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


def prepared_fleet(root: Path, attempts: int, gb: float) -> tuple[Path, dict, str, str, float]:
    """The fleet simulated (or reused), described, and grep's time over its files: (fleet, profile, since, until, grep s)."""
    profile = sized_profile(attempts, gb)
    fleet = root / "fleet"
    sim_s = ensure_fleet(fleet, profile)
    since, until = nights(fleet, profile)
    total_bytes = log_bytes(fleet)
    print(f"fleet: {profile['attempts']} attempts, {profile['nodes']} nodes, nights {since} to {until}, pad_bytes "
          f"{profile['pad_bytes']:,}; {fingerprint(fleet)}; simulated in {sim_s:.0f} s ({root})", flush=True)
    grep_s = grep_seconds([fleet / "catalog"])
    print(f"grep -cE over the same files: {grep_s:.2f} s ({total_bytes / 1e6 / grep_s:.0f} MB/s)", flush=True)
    return fleet, profile, since, until, grep_s


def run_history(root: Path, attempts: int, gb: float) -> int:
    """The local backfill, then the same again with --force into its full lake and warehouse: CPU of both and the ratio."""
    fleet, _, since, until, grep_s = prepared_fleet(root, attempts, gb)
    first = run_nightly(fleet, root / "history", "local", local_env(), since, until)
    again = run_nightly(fleet, root / "history", "local", local_env(), since, until, again=True)
    ratio = again["cpu_s"] / first["cpu_s"]
    meets = ratio <= TARGET_HISTORY_RATIO
    for name, r in (("first run", first), ("again, --force", again)):
        print(f"{name:<16} wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s (grep {grep_s:.2f} s), attributed "
              f"{r['attributed']}, failed {r['failed']}, verdict accuracy {r['verdict']:.1%}", flush=True)
    print(f"CPU again / first: {ratio:.2f}x ({'met' if meets else 'MISSED'}, target <= {TARGET_HISTORY_RATIO}x)")
    return 0 if meets else 1


def run_benchmark(root: Path, attempts: int, gb: float, flat: bool) -> int:
    fleet, profile, since, until, grep_s = prepared_fleet(root, attempts, gb)
    total_bytes = log_bytes(fleet)
    results = {"local": run_nightly(fleet, root / "local", "local", local_env(), since, until)}
    print(f"  local: {results['local']['wall_s']:.1f} s", flush=True)
    with prefect_server(root / "prefect") as (env, server_s):
        print(f"  prefect server started in {server_s:.1f} s (not counted)", flush=True)
        results["dask"] = run_nightly(fleet, root / "dask", "dask", env, since, until)
    print(f"  dask: {results['dask']['wall_s']:.1f} s", flush=True)
    print_runners(with_rates(results, profile["attempts"], total_bytes, grep_s))
    if not flat:
        return 0
    print(f"\nflat memory (local runner, largest process, limit {FLAT_LIMIT}x the run above):", flush=True)
    return 0 if check_flat(root, attempts, gb, results["local"], since, until) else 1


if __name__ == "__main__":
    sys.exit(main())
