"""A threaded stdlib HTTP server standing in for Loki and the Kubernetes API in tests and benchmarks.

* Loki `GET /loki/api/v1/query_range`: the documented `streams` answer from in-memory or generated streams,
  honouring `start` (inclusive), `end` (exclusive), `limit` (capped like `max_entries_limit_per_query`),
  `direction` and the label matchers of the stream selector (`{a="x", b=~"r1|r2"}`, also `!=`, `!~`).
* Kubernetes `GET /api/v1/namespaces/{ns}/pods/{pod}/log` (`container`, `timestamps`, `previous`); an unknown pod
  or container answers 404 with a `Status` object, as the API server does.
* Injectable faults (`Fault`): an HTTP status or a delay for the next N requests to a path prefix.
* Every request is recorded (`requests`: path, query parameters, headers).

The `fake_backends` fixture starts one on a free port; `serve()` runs one in its own process (benchmarks).
"""
from __future__ import annotations

import bisect
import heapq
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

MAX_ENTRIES_LIMIT = 5000  # Loki's default max_entries_limit_per_query
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)\s*([,}])')
_POD_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")


@dataclass
class Fault:
    """Answer `status` (after sleeping `delay_s`) to the next `times` requests whose path starts with `path_prefix`;
    `status=None` answers normally after the delay; `truncate` sends half the body and drops the connection;
    `times=None` applies to every request."""
    path_prefix: str
    status: int | None = None
    delay_s: float = 0.0
    truncate: bool = False
    times: int | None = 1


@dataclass
class MemoryStream:
    """A Loki stream held in memory: `values` are (ns timestamp, line), kept sorted by timestamp."""
    labels: dict[str, str]
    values: list[tuple[int, str]]

    def __post_init__(self):
        self.values = sorted(self.values, key=lambda v: v[0])
        self._ts = [v[0] for v in self.values]

    def forward(self, start: int, end: int):
        return iter(self.values[bisect.bisect_left(self._ts, start):bisect.bisect_left(self._ts, end)])

    def backward(self, start: int, end: int):
        return reversed(self.values[bisect.bisect_left(self._ts, start):bisect.bisect_left(self._ts, end)])


@dataclass
class GeneratedStream:
    """`count` realistic lines of one node, one every `step_ns` from `t0_ns`, made on demand from their index (the
    same line every time): serves gigabytes without holding them. `kind` is `applog` or `syslog`."""
    labels: dict[str, str]
    kind: str
    t0_ns: int
    step_ns: int
    count: int

    def forward(self, start: int, end: int):
        return ((self._ts(i), self._line(i)) for i in range(self._index(start), self._index(end)))

    def backward(self, start: int, end: int):
        return ((self._ts(i), self._line(i)) for i in range(self._index(end) - 1, self._index(start) - 1, -1))

    def _index(self, ts: int) -> int:
        """The first index whose timestamp is >= ts."""
        return min(max(-(-(ts - self.t0_ns) // self.step_ns), 0), self.count)

    def _ts(self, i: int) -> int:
        return self.t0_ns + i * self.step_ns

    def _line(self, i: int) -> str:
        node = self.labels.get("host", "node")
        pick = (i * 2654435761) % 1000  # a fixed scramble of the index: the same mix of lines on every run
        if self.kind == "syslog":
            if pick < 600:
                return f'kernel: [{5000 + i // 1000}.{i % 1000:06d}] audit: type=1400 audit({i}.123:{i}): apparmor="DENIED" operation="open" profile="snap.lxd" name="/proc/{i % 9000}/cmdline" pid={i % 65536} comm="python3"'
            if pick < 995:
                return f"systemd[1]: Started Session {i} of user slurm; cgroup /system.slice/slurmstepd.scope/job_{i % 90000}/step_0"
            return f"kernel: [{5000 + i // 1000}.{i % 1000:06d}] mlx5_core 0000:5e:00.0: mlx5e_update_carrier:301:(pid {i % 4096}): Link up"
        r = pick % 8
        if pick < 550:
            return f"{node}:{4100 + r}:{4200 + r} [{r}] NCCL INFO Channel {i % 32:02d}/0 : {r}[{r}] -> {(r + 1) % 8}[{(r + 1) % 8}] via P2P/IPC/read"
        if pick < 940:
            return f"[INFO] [engine.py:{300 + i % 50}:step] step={i} loss=2.31{i % 97:02d} lr=3.0e-4 grad_norm=0.93 tokens/s={41000 + i % 997} mem_alloc=61.2GB"
        if pick < 990:
            return f"[rank{r}]:[W1129 01:00:00.{i % 1000000:06d} ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {r}] using GPU {r} as device used by this process is currently unknown."
        if pick < 999:
            return f"[rank0]:[I1129 01:00:00.{i % 1000000:06d} train.py:212] iteration {i:8d}/  100000 | consumed samples: {i * 512} | elapsed time per iteration (ms): 1843.2 | lm loss: 2.3141E+00"
        return f"{node}:{4100 + r}:{4400 + r} [{r}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.9.{r}<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)"


@dataclass
class PodLog:
    """A container's log as the kubelet keeps it: (ns timestamp, line)."""
    lines: list[tuple[int, str]]

    def body(self, timestamps: bool) -> bytes:
        return "".join(f"{rfc3339_nano(ts)} {line}\n" if timestamps else f"{line}\n" for ts, line in self.lines).encode()


@dataclass
class FakeBackends:
    streams: list = field(default_factory=list)  # MemoryStream / GeneratedStream
    pod_logs: dict[tuple[str, str, str, bool], PodLog] = field(default_factory=dict)  # (ns, pod, container, previous)
    faults: list[Fault] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def start(self, port: int = 0) -> "FakeBackends":
        backends = self

        class Handler(_Handler):
            state = backends

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests_to(self, prefix: str) -> list[dict]:
        return [r for r in self.requests if r["path"].startswith(prefix)]

    def take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if path.startswith(fault.path_prefix) and (fault.times is None or fault.times > 0):
                if fault.times is not None:
                    fault.times -= 1
                return fault
        return None


class _Handler(BaseHTTPRequestHandler):
    state: FakeBackends
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: Nagle + delayed ACK would stall each answer
    truncate = False

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.state.requests.append({"path": url.path, "params": params, "headers": dict(self.headers)})
        try:
            fault = self.state.take_fault(url.path)
            if fault:
                time.sleep(fault.delay_s)
                self.truncate = fault.truncate
                if fault.status:
                    return self._send(fault.status, b"injected fault", "text/plain")
            if url.path == "/loki/api/v1/query_range":
                return self._query_range(params)
            match = _POD_LOG.match(url.path)
            if match:
                return self._pod_log(unquote(match.group(1)), unquote(match.group(2)), params)
            self._send(404, b"404 page not found", "text/plain")
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            pass

    def _query_range(self, params: dict[str, str]) -> None:
        try:
            matchers = parse_selector(params["query"])
            start, end = int(params.get("start", 0)), int(params["end"])
            limit = int(params.get("limit", 100))
        except (KeyError, ValueError) as e:
            return self._send(400, f"parse error: {e}".encode(), "text/plain")
        if limit > MAX_ENTRIES_LIMIT:
            return self._send(400, f"max entries limit per query exceeded, limit > max_entries_limit ({limit} > {MAX_ENTRIES_LIMIT})".encode(), "text/plain")
        forward = params.get("direction", "backward") == "forward"
        chosen = [(i, s) for i, s in enumerate(self.state.streams) if all(m(s.labels.get(k, "")) for k, m in matchers)]

        def ordered(i, stream):
            entries = stream.forward(start, end) if forward else stream.backward(start, end)
            return ((ts if forward else -ts, i, n, line) for n, (ts, line) in enumerate(entries))

        # the first `limit` entries of all matching streams in time order (ties: stream order, then stream position)
        by_stream: dict[int, list] = {}
        for key, i, _, line in islice(heapq.merge(*(ordered(i, s) for i, s in chosen)), limit):
            by_stream.setdefault(i, []).append([str(abs(key)), line])
        result = [{"stream": self.state.streams[i].labels, "values": values} for i, values in by_stream.items()]
        entries = sum(len(v) for v in by_stream.values())
        body = {"status": "success", "data": {"resultType": "streams", "result": result, "stats": {"summary": {
            "bytesProcessedPerSecond": 0, "linesProcessedPerSecond": 0, "totalBytesProcessed": 0,
            "totalLinesProcessed": entries, "execTime": 0.0}}}}
        self._send(200, json.dumps(body).encode(), "application/json")

    def _pod_log(self, namespace: str, pod: str, params: dict[str, str]) -> None:
        key = (namespace, pod, params.get("container", ""), params.get("previous") == "true")
        found = self.state.pod_logs.get(key)
        if found is None:
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": f'pods "{pod}" not found', "reason": "NotFound", "details": {"name": pod, "kind": "pods"}, "code": 404}
            return self._send(404, json.dumps(status).encode(), "application/json")
        self._send(200, found.body(params.get("timestamps") == "true"), "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.truncate:
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
            return
        self.wfile.write(body)


def parse_selector(query: str) -> list[tuple[str, Callable[[str], bool]]]:
    """`{a="x", b=~"r1|r2"}` -> [(label, predicate)]. Regex matchers are anchored, as in Loki (RE2 full match)."""
    text = query.strip()
    if not text.startswith("{"):
        raise ValueError("expected a stream selector")
    pos, out = 1, []
    while True:
        m = _MATCHER.match(text, pos)
        if not m:
            raise ValueError(f"cannot read matcher at {text[pos:]!r}")
        label, op, raw, sep = m.groups()
        value = json.loads(raw) if raw.startswith('"') else raw[1:-1]
        out.append((label, _predicate(op, value)))
        pos = m.end()
        if sep == "}":
            break
    if text[pos:].strip():
        raise ValueError(f"log pipelines are not supported by the fake: {text[pos:]!r}")
    return out


def _predicate(op: str, value: str):
    if op == "=":
        return lambda v: v == value
    if op == "!=":
        return lambda v: v != value
    pattern = re.compile(value)
    if op == "=~":
        return lambda v: pattern.fullmatch(v) is not None
    return lambda v: pattern.fullmatch(v) is None


def rfc3339_nano(ns: int) -> str:
    """Go's time.RFC3339Nano as the kubelet writes it: trailing zeros of the fraction dropped."""
    seconds, frac = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return stamp + (f".{frac:09d}".rstrip("0") if frac else "") + "Z"


def serve(streams: list, port_pipe) -> None:
    """Run a fake Loki serving `streams` until the process is terminated (benchmarks: its memory is not counted
    with the landing's). The chosen port is sent on `port_pipe`."""
    backends = FakeBackends(streams=streams).start()
    port_pipe.send(int(backends.url.rsplit(":", 1)[1]))
    threading.Event().wait()


@pytest.fixture()
def fake_backends():
    backends = FakeBackends().start()
    yield backends
    backends.stop()
