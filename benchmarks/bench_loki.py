"""Loki benchmark: realistic log lines served by the fake Loki (tests/fake_backends.py, in its own process, lines made
on demand), fetched by the Loki connector and landed through the normal landing path (staging, logs, events).

For each size, one fresh process lands one attempt whose six streams (3 nodes x training output, kernel log) hold
that many bytes of lines; it reports throughput (MB of Loki lines per second, fetch alone and fetch + landing) and
its own peak RSS, which must stay under 1 GiB and must not grow with the volume.

    .venv/bin/python benchmarks/bench_loki.py [--sizes 100,500] [--batch-mb 16] [--dir bench-out/loki]

`--batch-mb` is `[landing] batch_bytes` (default 16): the landing normalises units of that many bytes (files read in
quarter batches, packed across file ends; two units in flight), which is what bounds its memory. "Does not grow" is
checked between the first two sizes (the acceptance compares 100 and 500 MB), with 10 % for allocator noise.

Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fake_backends import GeneratedStream, serve  # noqa: E402

START_NS = 1_795_914_000_000_000_000  # 2026-11-29T01:00:00Z
WINDOW_S = 2 * 3600
NODES = ("node-01", "node-02", "node-03")
SYSLOG_SHARE = 0.1  # of the bytes: kernel logs are small beside training output
PEAK_LIMIT_BYTES = 1 << 30
FLAT_TOLERANCE = 1.10


def streams_for(megabytes: int) -> list[GeneratedStream]:
    """Six streams (labelled `bench=<megabytes>`) whose lines add up to about `megabytes` MB."""
    out = []
    for kind, job, share in (("applog", "training", 1 - SYSLOG_SHARE), ("syslog", "syslog", SYSLOG_SHARE)):
        for node in NODES:
            probe = GeneratedStream({"host": node}, kind, START_NS, 1, 1000)
            mean_line = sum(len(line) + 1 for _, line in probe.forward(START_NS, START_NS + 1000)) / 1000
            count = int(megabytes * 1e6 * share / len(NODES) / mean_line)
            labels = {"job": job, "host": node, "bench": str(megabytes)}
            out.append(GeneratedStream(labels, kind, START_NS, WINDOW_S * 1_000_000_000 // count, count))
    return out


def line_bytes(streams: list[GeneratedStream]) -> int:
    """The bytes of every line served (counted in the parent, outside the measured process)."""
    return sum(len(line.encode()) + 1 for s in streams for _, line in s.forward(START_NS, START_NS + WINDOW_S * 1_000_000_000))


@dataclass
class _TimedStage:
    """The Loki connector, timing its fetch (the staging part of landing)."""
    connector: object
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.connector.name

    def applies(self, ctx) -> bool:
        return self.connector.applies(ctx)

    def stage(self, ctx, staging):
        began = time.perf_counter()
        try:
            return self.connector.stage(ctx, staging)
        finally:
            self.seconds += time.perf_counter() - began


def land_one(url: str, megabytes: int, batch_mb: int, folder: Path) -> dict:
    """Runs in a fresh process: land one attempt from Loki, return timings and this process's peak RSS."""
    from firstfault.config import Config, LandingSettings, LakeSettings, LokiSettings
    from firstfault.lake import Lake
    from firstfault.connectors.loki import LokiConnector
    from firstfault.connectors.static_context import context_from_dict
    from firstfault.landing import land_attempt
    from firstfault.transforms.extract import load_patterns

    ctx = context_from_dict({"workload_id": f"bench-{megabytes}", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T03:00:00Z",
                             "nodes": list(NODES)}, str(folder / "attempt.yaml"), str(folder))
    streams = {"applog": f'{{job="training", bench="{megabytes}"}}', "syslog": f'{{job="syslog", bench="{megabytes}"}}'}
    config = Config(lake=LakeSettings(root=str(folder / "lake")), landing=LandingSettings(batch_bytes=batch_mb << 20),
                    loki=LokiSettings(url=url, streams=streams, lookback_s=0.0, grace_s=0.0, timeout_s=120.0))
    timed = _TimedStage(LokiConnector(config.loki))
    began = time.perf_counter()
    result = land_attempt(ctx, Lake(config.lake.root), load_patterns(), config.landing, [timed])
    total = time.perf_counter() - began
    loki = [r for r in result.reports if r["connector"] == "loki"]
    return {"fetch_s": timed.seconds, "total_s": total, "log_rows": result.log_rows, "event_rows": result.event_rows,
            "loki_rows": sum(r["rows"] for r in loki), "loki_status": sorted({r["status"] for r in loki}),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,500", help="MB of log lines per run, comma-separated")
    parser.add_argument("--batch-mb", type=int, default=16, help="[landing] batch_bytes in MB")
    parser.add_argument("--dir", default="bench-out/loki")
    parser.add_argument("--land", nargs=3, metavar=("URL", "MB", "DIR"), help=argparse.SUPPRESS)  # the measured child
    args = parser.parse_args()
    if args.land:
        url, megabytes, folder = args.land
        print(json.dumps(land_one(url, int(megabytes), args.batch_mb, Path(folder))))
        return 0

    sizes = [int(s) for s in args.sizes.split(",")]
    all_streams = [s for mb in sizes for s in streams_for(mb)]
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(all_streams, child), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{parent.recv()}"
    failed = False
    try:
        print(f"{'size':>6} {'lines MB':>9} {'rows':>10} {'fetch MB/s':>11} {'land MB/s':>10} {'peak RSS MB':>12}")
        peaks = []
        for mb in sizes:
            folder = Path(args.dir) / f"{mb}mb"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            served = line_bytes(streams_for(mb)) / 1e6
            run = subprocess.run([sys.executable, __file__, "--land", url, str(mb), str(folder), "--batch-mb", str(args.batch_mb)],
                                 capture_output=True, text=True)
            if run.returncode:
                print(run.stderr, file=sys.stderr)
                return 1
            r = json.loads(run.stdout.strip().splitlines()[-1])
            peaks.append(r["peak_rss_bytes"])
            print(f"{mb:>4}MB {served:>9.1f} {r['loki_rows']:>10} {served / r['fetch_s']:>11.1f} {served / r['total_s']:>10.1f} "
                  f"{r['peak_rss_bytes'] / 2**20:>12.0f}   loki {'/'.join(r['loki_status'])}, {r['log_rows']} log rows, "
                  f"{r['event_rows']} events, fetch {r['fetch_s']:.1f} s, total {r['total_s']:.1f} s")
            failed |= r["loki_status"] != ["ok"] or r["log_rows"] != r["loki_rows"]
            shutil.rmtree(folder, ignore_errors=True)
        if max(peaks) >= PEAK_LIMIT_BYTES:
            print(f"FAIL: peak RSS {max(peaks) / 2**20:.0f} MB >= 1 GiB")
            failed = True
        for mb, peak in zip(sizes[1:], peaks[1:]):
            print(f"peak RSS at {mb} MB / at {sizes[0]} MB: {peak / peaks[0]:.2f}x for {mb / sizes[0]:.0f}x the volume")
        if len(peaks) > 1 and peaks[1] > peaks[0] * FLAT_TOLERANCE:
            print(f"FAIL: peak RSS grows with the volume ({peaks[1] / peaks[0]:.2f}x > {FLAT_TOLERANCE:.2f}x)")
            failed = True
    finally:
        server.terminate()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
