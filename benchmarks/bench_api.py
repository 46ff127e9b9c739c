"""The warm API: `POST /v1/attribute` of the 230 KB attempt of bench_attempt.py, 20 requests after 3 warm-ups, against
a `firstfault api` process (bearer token, `[api] allowed_roots` confined to the attempt's folder, as in
tests/test_api.py). Prints the median and p90 request time (target: median <= 0.3 s), the server's CPU seconds over
the timed requests, and `grep -cE` over the same files beside them.

    .venv/bin/python benchmarks/bench_api.py [--requests 20] [--warmups 3] [--dir bench-api]

Not part of the CI test run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
from bench_attempt import generate, inputs
from measure import grep_seconds

TOKEN_ENV = "FIRSTFAULT_BENCH_API_TOKEN"
TOKEN = "bench-api-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, path: str, body: dict | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except (urllib.error.URLError, ConnectionError):
        return 0, None


def start_server(root: Path, attempt_dir: Path) -> tuple[subprocess.Popen, str]:
    config = root / "firstfault.toml"
    config.write_text(f'[api]\ntoken_env = "{TOKEN_ENV}"\nallowed_roots = ["{attempt_dir.as_posix()}"]\n')
    port = free_port()
    env = {**os.environ, TOKEN_ENV: TOKEN}
    env.pop("PREFECT_API_URL", None)
    server = subprocess.Popen([sys.executable, "-m", "firstfault.cli", "api", "--config", str(config), "--port", str(port),
                               "--lake", str(root / "lake"), "--warehouse", str(root / "w.duckdb")],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=root)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while call(url, "/healthz")[0] != 200:
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(f"the API server did not start: {server.stderr.read()[-2000:]}")
        time.sleep(0.05)
    return server, url


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--dir", default="bench-api")
    args = parser.parse_args()
    root = Path(args.dir).resolve()
    shutil.rmtree(root, ignore_errors=True)
    spec = generate(root / "input", 0.23, 0.77)
    files = inputs(spec)
    body = {**json.loads(spec.read_text()), "base_dir": str(spec.parent)}
    server, url = start_server(root, spec.parent)
    try:
        for _ in range(args.warmups):
            status, first = call(url, "/v1/attribute", body)
            if status != 200:
                raise RuntimeError(f"warm-up failed: {status} {first}")
        process = psutil.Process(server.pid)
        cpu_before = sum(process.cpu_times()[:2])
        seconds = []
        for _ in range(args.requests):
            started = time.perf_counter()
            status, verdict = call(url, "/v1/attribute", body)
            seconds.append(time.perf_counter() - started)
            if status != 200 or verdict != first:
                raise RuntimeError(f"request answered {status}, or a verdict other than the warm-ups': {verdict}")
        cpu = sum(process.cpu_times()[:2]) - cpu_before
    finally:
        server.terminate()
        server.wait(30)
    grep = grep_seconds(files)
    size = sum(p.stat().st_size for p in files)
    p90 = statistics.quantiles(seconds, n=10)[-1]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; grep -cE over the same {size / 1e3:.0f} KB: "
          f"{grep * 1e3:.1f} ms")
    print(f"POST /v1/attribute of the 230 KB attempt, {args.requests} requests after {args.warmups} warm-ups: median "
          f"{statistics.median(seconds):.3f} s (target <= 0.3 s), p90 {p90:.3f} s, best {min(seconds):.3f} s; server CPU "
          f"{cpu / args.requests:.3f} s per request; verdict {(first['verdict'], first['domain'], first['subdomain'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
