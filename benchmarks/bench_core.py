"""Core benchmark: raw text -> verdict over >= 1 GB of realistic logs, measured beside `grep -E` on the same bytes.

Prints (a) end-to-end time (landing, extraction, rules, warehouse load) as a ratio to grep's time for counting the
same trigger words, (b) landing throughput in MB/s, (c) peak memory, (d) process and Prefect start-up.

    .venv/bin/python benchmarks/bench_core.py [--gb 1.0] [--dir bench-out]

Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODES_PER_ATTEMPT = 4


def block(attempt: int, nodes: list[str], rng: random.Random) -> bytes:
    """~2,000 lines of training output in the shapes real training jobs print (mostly noise, a few trigger lines)."""
    lines = []
    for i in range(2000):
        r = rng.randrange(len(nodes) * 8)
        node = nodes[r // 8]
        t = f"{1 + i // 600:02d}:{(i // 10) % 60:02d}:{i % 60:02d}"
        choice = rng.random()
        if choice < 0.50:
            lines.append(f"{r}: {node}:{4100 + r}:{4200 + r} [{r % 8}] NCCL INFO Channel {i % 32:02d}/0 : {r}[{r % 8}] -> {(r + 1) % 32}[{(r + 1) % 8}] via P2P/IPC/read")
        elif choice < 0.70:
            lines.append(f"{r}: [rank{r}]:[W1129 {t}.{i:06d}123 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {r}] using GPU {r % 8} as device used by this process is currently unknown.")
        elif choice < 0.97:
            lines.append(f"{r}: [2026-11-29 {t},{i % 1000:03d}] [INFO] [engine.py:{300 + i % 50}:step] step={i} loss=2.31 lr=3.0e-4 grad_norm=0.93 tokens/s=41523")
        elif choice < 0.99:
            lines.append(f"0: [rank0]:[I1129 {t}.{i:06d}123 train.py:212] iteration {i:8d}/  100000 | consumed samples: {i * 512} | elapsed time per iteration (ms): 1843.2 | lm loss: 2.3141E+00")
        elif choice < 0.999:
            lines.append(f"{r}: {node}:{4100 + r}:{4200 + r} [{r % 8}] NCCL INFO comm 0x55d9607ee240 rank {r} nRanks 32 nNodes 4 localRanks 8 localRank {r % 8} MNNVL 0")
        else:
            lines.append(f"{r}: [2026-11-29 {t}] {node}:{4100 + r}:{4400 + r} [{r % 8}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.{attempt % 250}.{(r + 9) % 32}<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)")
    return ("\n".join(lines) + "\n").encode()


def kernel_block(node: str, rng: random.Random) -> bytes:
    lines = []
    for i in range(500):
        t = f"01:{(i // 10) % 60:02d}:{i % 60:02d}"
        lines.append(rng.choice([
            f"Nov 29 {t} {node} kernel: [  {5000 + i}.644336] audit: type=1400 audit({i}.123:{i}): apparmor=\"DENIED\" operation=\"open\" profile=\"snap\"",
            f"Nov 29 {t} {node} systemd[1]: Started Session {i} of user slurm.",
            f"Nov 29 {t} {node} kernel: [  {5000 + i}.644336] mlx5_core 0000:5e:00.0: mlx5e_update_carrier:301:(pid 1): Link up",
        ]))
    return ("\n".join(lines) + "\n").encode()


def generate(root: Path, total_bytes: int) -> list[Path]:
    rng = random.Random(7)
    per_attempt = 100 * 1024 * 1024
    attempts = max(1, -(-total_bytes // per_attempt))
    specs = []
    for a in range(attempts):
        folder = root / f"attempt-{a:03d}"
        (folder / "kernel").mkdir(parents=True)
        nodes = [f"a{a:03d}-n{k}" for k in range(NODES_PER_ATTEMPT)]
        blocks = [block(a, nodes, rng) for _ in range(8)]
        with open(folder / "train.log", "wb") as f:
            written = 0
            i = 0
            while written < per_attempt:
                data = blocks[i % len(blocks)]
                f.write(data)
                written += len(data)
                i += 1
            fail_node = nodes[a % NODES_PER_ATTEMPT]
            f.write(f"{(a % 4) * 8}: [rank{(a % 4) * 8}]:[E1129 01:59:00.000000123 ProcessGroupNCCL.cpp:607] [Rank {(a % 4) * 8}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n".encode())
        for n in nodes:
            kb = kernel_block(n, rng)
            with open(folder / "kernel" / f"{n}.log", "wb") as f:
                for _ in range(6):
                    f.write(kb)
                if n == fail_node:
                    f.write(f"Nov 29 01:49:03 {n} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n".encode())
        spec = {
            "workload_id": f"bench-{a:03d}", "cluster": "bench", "state": "FAILED", "start": "2026-11-29T01:00:00Z",
            "end": "2026-11-29T02:00:00Z", "nodes": nodes,
            "logs": [{"source": "applog", "path": "train.log"}, {"source": "syslog", "path": "kernel/{node}.log"}],
        }
        (folder / "attempt.yaml").write_text(json.dumps(spec))
        specs.append(folder / "attempt.yaml")
    return specs


def grep_time(files: list[Path], triggers: list[str]) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(re.sub(r"([.^$*+?()[\]{}|\\])", r"\\\1", t) for t in triggers))
        pattern_file = f.name
    started = time.perf_counter()
    # stdout must be a pipe: GNU grep stops at the first match when it sees /dev/null
    done = subprocess.run(["grep", "-E", "-c", "-f", pattern_file, *map(str, files)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"grep failed: {done.stderr.decode()[:300]}")
    return time.perf_counter() - started


def measure_run(spec_paths: list[str], out: str) -> None:
    """Child process: the whole run, then its timings as JSON on stdout (peak memory is read by the parent)."""
    from firstfault.config import Config, LakeSettings, WarehouseSettings
    from firstfault.connectors.static_context import load_static_context
    from firstfault.run import attribute, land, store

    config = Config(lake=LakeSettings(f"{out}/lake"), warehouse=WarehouseSettings(f"{out}/w.duckdb"))
    contexts = [load_static_context(p) for p in spec_paths]
    t0 = time.perf_counter()
    results = land(contexts, config)
    t1 = time.perf_counter()
    tables = attribute(contexts, config)
    from datetime import datetime, timezone

    store(config, tables, "bench", datetime.now(timezone.utc), len(contexts))
    t2 = time.perf_counter()
    verdicts = {r["attempt_id"]: (r["verdict"], r["subdomain"]) for r in tables.tables["attributions"].to_pylist()}
    print(json.dumps({"land_s": t1 - t0, "attribute_load_s": t2 - t1, "lines": sum(r.log_rows for r in results),
                      "events": sum(r.event_rows for r in results), "verdicts": sorted(set(verdicts.values()))}))


def startup(cmd: list[str], env=None, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--dir", default="bench-out")
    parser.add_argument("--child", nargs="*")
    args = parser.parse_args()
    if args.child is not None:
        measure_run(args.child[1:], args.child[0])
        return
    root = Path(args.dir).resolve()
    shutil.rmtree(root, ignore_errors=True)
    print(f"generating {args.gb:.2f} GB of logs in {root} ...", flush=True)
    specs = generate(root / "input", int(args.gb * 1024**3))
    files = [p for p in (root / "input").rglob("*.log")]
    total = sum(p.stat().st_size for p in files)

    from firstfault.transforms.extract import load_patterns, trigger_literals
    from firstfault.transforms.multiline import MULTILINE_TRIGGERS

    triggers = sorted(set(trigger_literals(load_patterns())) | set(MULTILINE_TRIGGERS))
    grep_time(files, triggers)  # warm the page cache for both
    g = grep_time(files, triggers)

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    child = subprocess.run([sys.executable, __file__, "--child", str(root / "run"), *map(str, specs)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    peak_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    r = json.loads(child.stdout.strip().splitlines()[-1])

    python_s = startup([sys.executable, "-c", "pass"])
    cli_s = startup([sys.executable, "-m", "firstfault.cli", "--help"])
    prefect_import_s = startup([sys.executable, "-c", "import prefect"])
    env = {**os.environ, "PREFECT_HOME": str(root / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    flow_code = "from prefect import flow\n@flow\ndef f():\n    return 1\nf()"
    prefect_flow_s = startup([sys.executable, "-c", flow_code], env=env, repeat=1)

    mb = total / 1e6
    print(f"input: {len(specs)} attempts, {len(files)} files, {mb:,.0f} MB, {r['lines']:,} lines, {r['events']:,} events")
    print(f"verdicts: {r['verdicts']}")
    print(f"grep -E -c ({len(triggers)} trigger words): {g:.2f} s  ({mb / g:,.0f} MB/s)")
    print(f"(a) raw text -> verdict: {r['land_s'] + r['attribute_load_s']:.2f} s in-process ({wall:.2f} s with interpreter start); "
          f"ratio grep/firstfault = {g / (r['land_s'] + r['attribute_load_s']):.2f}x (target >= 0.25x)")
    print(f"(b) landing (split, decorate, stamp, place, write Parquet, extract): {r['land_s']:.2f} s = {mb / r['land_s']:,.0f} MB/s (target >= 250)")
    print(f"    rules + warehouse load: {r['attribute_load_s']:.2f} s")
    print(f"(c) peak memory (max RSS of the run): {peak_mb:,.0f} MB")
    print(f"(d) start-up: python {python_s:.2f} s; firstfault CLI {cli_s:.2f} s; import prefect {prefect_import_s:.2f} s; "
          f"first Prefect flow with a temporary server {prefect_flow_s:.2f} s (never paid by `attribute` without PREFECT_API_URL)")


if __name__ == "__main__":
    main()
