"""One long attempt, raw text to verdict, as a whole `firstfault attribute --static` process (start-up included),
measured beside `grep -cE` over the same files in the same run.

The attempt is shaped like a real long job: an srun-labelled application log of Megatron iteration lines (~350 bytes,
advancing stamps, varying values: nothing repeated verbatim), a few hundred NCCL/torch lines after an Xid 149 root on
one node, and three syslog files. Prints wall time and the ratio to grep, peak RSS of the largest process and of all
processes together, CPU seconds per stage (stages.py), the end-to-end time of a 230 KB attempt, and checks that peak
memory stays flat: at 4x the volume, and with 95 % progress lines, it must stay within 1.1x of the base (exit 1).

    .venv/bin/python benchmarks/bench_attempt.py [--mb 500] [--dir bench-attempt]
    .venv/bin/python benchmarks/bench_attempt.py --only small [--repeat 5]   # the 230 KB attempt alone, a few seconds

Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
from measure import grep_seconds, measured_run, memory_is_flat

from firstfault.stages import read_report
from firstfault.synthetic.logwriters import megatron_iteration_line

NODES = ("gpu-001", "gpu-002", "gpu-003")
GPUS_PER_NODE = 8
START = datetime(2026, 11, 29, 1, 0, tzinfo=timezone.utc)
XID_NODE = "gpu-002"


def kernel_line(node: str, at: datetime, uptime: float, rng: random.Random) -> str:
    text = rng.choice((
        f"audit: type=1400 audit({uptime:.3f}:{rng.randrange(10**6)}): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.{rng.randrange(99)}\"",
        f"mlx5_core 0000:5e:00.0: mlx5e_update_carrier:301:(pid {rng.randrange(10**5)}): Link up",
        f"nvidia-nvswitch{rng.randrange(4)}: open (major={500 + rng.randrange(20)})",
        f"EXT4-fs (nvme0n1p{rng.randrange(1, 4)}): mounted filesystem with ordered data mode. Quota mode: none.",
    ))
    return f"{at:%b %d %H:%M:%S} {node} kernel: [{uptime:12.6f}] {text}\n"


def generate(root: Path, total_mb: float, progress_share: float, seed: int = 7) -> Path:
    """An attempt of about `total_mb` MB of which `progress_share` of the bytes are iteration lines."""
    rng = random.Random(seed)
    (root / "kernel").mkdir(parents=True, exist_ok=True)
    app_bytes = total_mb * 1e6 * progress_share
    kernel_bytes = total_mb * 1e6 * (1 - progress_share) / len(NODES)
    iterations = max(10, int(app_bytes / 350))
    step = timedelta(seconds=2)
    end = START + step * iterations + timedelta(minutes=12)
    failed_at = START + step * iterations
    last_rank = len(NODES) * GPUS_PER_NODE - 1
    with open(root / "train.log", "w") as f:
        for i in range(iterations):
            f.write(megatron_iteration_line(last_rank, i + 1, START + step * i, rng))
        for r in range(len(NODES) * GPUS_PER_NODE):  # the cascade: a few hundred NCCL/torch lines
            node = NODES[r // GPUS_PER_NODE]
            t = failed_at + timedelta(seconds=30 + r)
            f.write(f"{r}: {node}:{4100 + r}:{4200 + r} [{r % 8}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
                    f"from peer 10.0.0.{2 + r % 3}<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n")
            for k in range(6):
                f.write(f"{r}: [rank{r}]:[E{t:%m%d %H:%M:%S}.{k:06d}123 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
                        f"collective operation timeout: WorkNCCL(SeqNum={9000 + k}, OpType=ALLREDUCE, NumelIn=466119168, "
                        f"NumelOut=466119168, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n")
    boot = START - timedelta(days=3)
    for node in NODES:
        lines = max(1, int(kernel_bytes / 150))
        span = (end - START).total_seconds()
        with open(root / "kernel" / f"{node}.log", "w") as f:
            for k in range(lines):
                at = START + timedelta(seconds=span * k / lines)
                if node == XID_NODE and at >= failed_at and k and START + timedelta(seconds=span * (k - 1) / lines) < failed_at:
                    f.write(f"{at:%b %d %H:%M:%S} {node} kernel: [{(at - boot).total_seconds():12.6f}] NVRM: Xid (PCI:0000:3b:00): 149, "
                            "NETIR_LINK_EVT Fatal XC0 i0 Link 04 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n")
                f.write(kernel_line(node, at, (at - boot).total_seconds(), rng))
    spec = {"workload_id": "long-job", "cluster": "bench", "state": "FAILED", "start": START.isoformat(),
            "end": end.isoformat(), "nodes": list(NODES), "gpus_per_node": GPUS_PER_NODE, "gpu_model": "H100",
            "logs": [{"source": "applog", "path": "train.log"}, {"source": "syslog", "path": "kernel/{node}.log"}]}
    (root / "attempt.yaml").write_text(json.dumps(spec))
    return root / "attempt.yaml"


def inputs(spec: Path) -> list[Path]:
    return [spec.parent / "train.log", *sorted((spec.parent / "kernel").glob("*.log"))]


def attribute(spec: Path, out: Path) -> dict:
    """`firstfault attribute --static` as a whole process: wall, peak memory, CPU per stage and the verdict."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    stage_file = out / "stages.json"
    env = {**os.environ, "FIRSTFAULT_STAGE_CPU": str(stage_file)}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "firstfault.cli", "attribute", "--static", str(spec), "--json",
           "--lake", str(out / "lake"), "--warehouse", str(out / "w.duckdb")]
    run = measured_run(cmd, env)
    verdict = json.loads(run.stdout)
    return {"wall_s": run.wall_s, "cpu_s": run.cpu_s, "largest_mb": run.largest_mb, "total_mb": run.total_mb,
            "stages": read_report(str(stage_file)),
            "verdict": (verdict["verdict"], verdict["domain"], verdict["subdomain"], verdict["culprit_nodes"])}


def import_cpu_seconds() -> float:
    """CPU of a process that only imports what `attribute` imports (the interpreter's own start included)."""
    code = "import firstfault.cli, firstfault.run, firstfault.landing, firstfault.connectors.registry"
    before = psutil.Process().cpu_times()
    subprocess.run([sys.executable, "-c", code], check=True)
    after = psutil.Process().cpu_times()
    return (after.children_user + after.children_system) - (before.children_user + before.children_system)


def small_only(root: Path, repeat: int) -> int:
    """The 230 KB attempt alone, `repeat` times: median and best wall, CPU seconds per stage of the median run."""
    spec = generate(root / "230_KB" / "input", 0.23, 0.77)
    files = inputs(spec)
    grep = grep_seconds(files)
    size = sum(p.stat().st_size for p in files)
    runs = sorted((attribute(spec, spec.parent.parent / "run") for _ in range(repeat)), key=lambda r: r["wall_s"])
    median = runs[len(runs) // 2]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; grep -cE over the same {size / 1e3:.0f} KB: "
          f"{grep * 1e3:.1f} ms")
    print(f"230 KB attempt end to end ({repeat} runs): median {median['wall_s']:.2f} s wall, {median['cpu_s']:.2f} CPU s; "
          f"best {runs[0]['wall_s']:.2f} s (target <= 0.8 s); verdict {median['verdict']}")
    print(f"imports {import_cpu_seconds():.2f} CPU s (a process that only imports); CPU seconds per stage of the median run:")
    for stage_name, seconds in sorted(median["stages"].items(), key=lambda kv: -kv[1]):
        print(f"  {stage_name:>8}: {seconds:6.3f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=500, help="size of the attempt (the flat check also runs a quarter of it)")
    parser.add_argument("--dir", default="bench-attempt")
    parser.add_argument("--only", choices=("small",), help="run only the 230 KB attempt")
    parser.add_argument("--repeat", type=int, default=5, help="runs of the 230 KB attempt with --only small")
    args = parser.parse_args()
    root = Path(args.dir).resolve()
    shutil.rmtree(root, ignore_errors=True)
    if args.only == "small":
        return small_only(root, args.repeat)
    runs = {"base": (args.mb / 4, 0.77), "4x volume": (args.mb, 0.77), "95 % progress": (args.mb / 4, 0.95),
            "230 KB": (0.23, 0.77)}
    results = {}
    for name, (mb, share) in runs.items():
        spec = generate(root / name.replace(" ", "_").replace("%", "pct") / "input", mb, share)
        files = inputs(spec)
        size = sum(p.stat().st_size for p in files) / 1e6
        grep = grep_seconds(files)
        r = attribute(spec, spec.parent.parent / "run")
        results[name] = r
        print(f"{name:>14}: {size:8.1f} MB  firstfault {r['wall_s']:7.2f} s  grep {grep:6.3f} s  ratio grep/firstfault "
              f"{grep / r['wall_s']:.3f}x  peak RSS largest {r['largest_mb']:6.0f} MB, all {r['total_mb']:6.0f} MB  "
              f"verdict {r['verdict']}", flush=True)
    imports = import_cpu_seconds()
    small = results["230 KB"]["stages"]
    main_run = results["4x volume"]["stages"]
    print(f"CPU seconds per stage of the {args.mb:.0f} MB attempt (imports {imports:.2f} s; fixed cost = the 230 KB attempt's "
          f"CPU less imports: {small['total'] - imports:.2f} s):")
    named = {k: v for k, v in main_run.items() if k != "total"}
    for stage_name, seconds in sorted(named.items(), key=lambda kv: -kv[1]):
        print(f"  {stage_name:>8}: {seconds:7.2f} s")
    print(f"  {'other':>8}: {main_run['total'] - sum(named.values()) - imports:7.2f} s  (reading, events, fixed cost)")
    print(f"230 KB attempt end to end: {results['230 KB']['wall_s']:.2f} s (target <= 0.8 s)")
    peaks = {name: results[name]["largest_mb"] for name in ("4x volume", "95 % progress")}
    return 0 if memory_is_flat(results["base"]["largest_mb"], peaks) else 1


if __name__ == "__main__":
    sys.exit(main())
