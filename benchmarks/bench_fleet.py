"""Fleet benchmark: the nightly over a simulated fleet (>= 2,000 attempts, >= 2 GB of logs by default), once with
the local runner and once with `--runner dask` (a local Dask cluster of 2 worker processes, through Prefect), on
separate lakes and warehouses, in the same script.

Every night runs as its own `firstfault nightly` subprocess (one per UTC day the attempts end on); each runner's
nights run under a driver subprocess, so its peak memory is the max RSS of its descendants
(resource.getrusage(RUSAGE_CHILDREN), Dask workers included). Prints attempts/s, MB/s, peak memory and wall time of
both runners side by side, and `evaluate`'s domain/culprit accuracy of each warehouse against the injected truth.
The volume comes from `simulate(pad_bytes=...)` (benign noise lines), not from more attempts.

    .venv/bin/python benchmarks/bench_fleet.py [--attempts 2000] [--gb 2.0] [--nodes 256] [--days 7] [--dir DIR]

Not part of the CI test run. The Dask nights run against one Prefect server started by the script (as
`firstfault serve` runs under a server in production); its start-up is printed, not counted.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

FIRSTFAULT = [sys.executable, "-c", "import sys; from firstfault.cli import main; sys.exit(main())"]


def prefect_server(home: Path) -> tuple[subprocess.Popen, dict, float]:
    """A Prefect server for the Dask nights, as `firstfault serve` runs under one in production (otherwise each
    night would start a temporary server of its own). Returns the process, its env and its start-up time."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api"
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            if server.poll() is not None or time.perf_counter() - started > 120:
                raise SystemExit("prefect server did not start")
            time.sleep(0.5)
    return server, {**env, "PREFECT_API_URL": url}, time.perf_counter() - started


def run_days(fleet: Path, out: Path, runner: str, days: list[str]) -> dict:
    """Driver (in its own process): one `firstfault nightly` subprocess per day; prints a JSON line."""
    env = {**os.environ, "PREFECT_HOME": str(out / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server, server_s = None, 0.0
    if runner == "dask":
        server, env, server_s = prefect_server(out / "prefect")
    attributed = failed = 0
    started = time.perf_counter()
    for day in days:
        cmd = [*FIRSTFAULT, "nightly", "--date", day, "--catalog", str(fleet / "catalog"), "--lake", str(out / "lake"),
               "--warehouse", str(out / "wh.duckdb"), "--json", "--prefect", "never" if runner == "local" else "auto"]
        if runner == "dask":
            cmd += ["--runner", "dask"]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"nightly {runner} {day} failed ({done.returncode})")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        attributed += summary.get("attributed", 0)
        failed += summary.get("failed", 0)
    wall = time.perf_counter() - started
    if server is not None:
        server.terminate()
        server.wait()
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"runner": runner, "wall_s": wall, "peak_mb": peak_mb, "attributed": attributed, "failed": failed,
            "server_s": server_s}


def log_bytes(fleet: Path) -> int:
    return sum(p.stat().st_size for p in (fleet / "catalog").rglob("*.log"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=2000)
    ap.add_argument("--gb", type=float, default=2.0, help="total log volume to reach by padding (GB, 1e9 bytes)")
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runners", default="local,dask", help="comma-separated: local, dask")
    ap.add_argument("--dir", help="work folder (default: a temporary folder, removed afterwards)")
    ap.add_argument("--child", nargs=3, metavar=("FLEET", "OUT", "RUNNER"), help=argparse.SUPPRESS)
    ap.add_argument("--child-days", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        fleet, out, runner = args.child
        print(json.dumps(run_days(Path(fleet), Path(out), runner, args.child_days.split(","))))
        return 0

    from firstfault.synthetic.simulate import evaluate, read_truth, simulate

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    fleet = root / "fleet"
    params = json.dumps({k: getattr(args, k) for k in ("attempts", "gb", "nodes", "days", "seed")}, sort_keys=True)
    t = time.perf_counter()
    # a fleet simulated with the same parameters in --dir is reused (simulating 2 GB takes minutes)
    if not (fleet / "params.json").exists() or (fleet / "params.json").read_text() != params:
        if fleet.exists():
            shutil.rmtree(fleet)
        # the unpadded simulator writes ~120 KB of logs per attempt at 256 nodes; padding brings the total to --gb
        simulate(fleet, nodes=args.nodes, attempts=args.attempts, days=args.days, seed=args.seed,
                 pad_bytes=max(0, int(args.gb * 1e9 / args.attempts) - 120_000))
        (fleet / "params.json").write_text(params)
    sim_s = time.perf_counter() - t
    total = log_bytes(fleet)
    truth = read_truth(fleet)
    first = min(date.fromisoformat(Path(x["spec"]).parts[1]) for x in truth)
    days = [(first + timedelta(days=i)).isoformat() for i in range(args.days + 1)]  # ends up to 4 h after the start
    print(f"fleet: {len(truth)} attempts, {total / 1e9:.2f} GB of logs in {len(list((fleet / 'catalog').rglob('*.log')))} files, "
          f"{args.nodes} nodes, {len(days)} nights; simulated in {sim_s:.1f} s ({root})", flush=True)

    results = []
    for runner in args.runners.split(","):
        out = root / runner
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        child = subprocess.run([sys.executable, __file__, "--child", str(fleet), str(out), runner, "--child-days", ",".join(days)],
                               capture_output=True, text=True)
        if child.returncode != 0:
            sys.stderr.write(child.stdout + child.stderr)
            return child.returncode
        r = json.loads(child.stdout.strip().splitlines()[-1])
        score = evaluate(fleet, out / "wh.duckdb")
        r.update(domain=score["domain_accuracy"], culprit=score["culprit_accuracy"], verdict=score["verdict_accuracy"],
                 missing=score["missing"])
        results.append(r)
        print(f"  {runner}: {r['wall_s']:.1f} s", flush=True)

    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    print()
    print(f"{'runner':<8} {'wall s':>8} {'attempts/s':>11} {'MB/s':>8} {'peak MB':>9} {'failed':>7} {'domain acc':>11} {'culprit acc':>12} {'verdict acc':>12}")
    for r in results:
        print(f"{r['runner']:<8} {r['wall_s']:>8.1f} {len(truth) / r['wall_s']:>11.2f} {total / 1e6 / r['wall_s']:>8.2f} "
              f"{r['peak_mb']:>9.0f} {r['failed']:>7} {pct(r['domain']):>11} {pct(r['culprit']):>12} {pct(r['verdict']):>12}")
    by = {r["runner"]: r for r in results}
    if "local" in by and "dask" in by:
        print(f"\ndask / local time: {by['dask']['wall_s']:.1f} s / {by['local']['wall_s']:.1f} s = "
              f"{by['dask']['wall_s'] / by['local']['wall_s']:.2f}x (2 worker processes, through a Prefect server started "
              f"once in {by['dask']['server_s']:.1f} s, not counted)")
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
