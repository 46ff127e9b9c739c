"""A simulated fleet for measuring attribution accuracy (`firstfault simulate`, `firstfault evaluate`).

`simulate` writes DIR/topology.yaml (node -> leaf switch and port), DIR/catalog/<day>/<attempt>/ (static context and
logs in the line formats real clusters print, through the shared writers of synthetic/logwriters.py),
DIR/truth.jsonl and DIR/fleet_truth.json (the injected repeat offenders: lemon nodes and the bad switch port). The
truth of every attempt comes ONLY from the fault that was injected into it (the FAULTS table below), never from the
rules. Optionally each attempt's metrics (synthetic/metrics.py) and requeued attempts of failed jobs; `evaluate`
scores a warehouse against the truth (synthetic/scorecard.py). The failure mix follows the Llama 3 405B interruption
table plus application failures and lifecycle endings. Deterministic for a seed.
"""
from __future__ import annotations

import functools
import json
import random
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml
from firstfault.connectors.static_context import load_static_context
from firstfault.landing import events_from_lines
from firstfault.rules_sql.catalogue import LINE_NODE
from firstfault.rules_sql.rendered_cases import first_rendered
from firstfault.transforms.messages import Example, Message, load_catalogue
from firstfault.synthetic.logwriters import BUS_IDS, GPUS, Scenario, write_attempt
from firstfault.synthetic.metrics import metrics_csv
from firstfault.warehouse.read import verdict_summaries

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault import progress
from firstfault.synthetic import scorecard
from firstfault.run import load_rule_set, run_attempts

T0 = datetime(2026, 11, 1, 0, 0, 0, tzinfo=timezone.utc)
GPU_MODELS = (("H100", 0.55), ("A100", 0.2), ("B200", 0.15), ("H200", 0.1))
KERNEL_FORMATS = ("syslog", "dmesg_t", "iso")
CLUSTER = "sim"

# kind -> (weight, expected verdict, domain, subdomain, attributable). Weights: per 1,000 attempts; the unexpected
# hardware/software/network rows keep the proportions of the Llama 3 table (faulty GPU 148, HBM+SRAM 91, software
# bug 54, switch/cable 35, host maintenance 32, GSP 17, NIC 7, NCCL watchdog unknown 7).
FAULTS: dict[str, tuple[float, str, str | None, str | None, bool]] = {
    "success": (400, "not_failed", None, None, True),
    "time_limit": (45, "attributed", "infrastructure", "time_limit", True),
    "cancelled": (25, "attributed", "infrastructure", "cancelled", True),
    "gpu_lost": (48, "attributed", "hardware", "gpu_lost", True),            # faulty GPU: Xid 79
    "gpu_nvlink": (38, "attributed", "hardware", "gpu_nvlink", True),        # faulty GPU: Xid 74 / 149
    "gpu_firmware": (24, "attributed", "hardware", "gpu_firmware", True),    # GSP: Xid 119
    "gpu_memory": (54, "attributed", "hardware", "gpu_memory", True),        # HBM/SRAM: Xid 48/94/95 + row remap
    "ib_link": (21, "attributed", "network", "ib_link", True),              # switch/cable
    "nic": (5, "attributed", "network", "nic", True),
    "node_failure": (12, "attributed", "infrastructure", "node_failure", True),  # host maintenance
    "preemption": (8, "attributed", "infrastructure", "preemption", True),
    "nccl_segfault": (16, "attributed", "software", "nccl", True),          # software bug (dependency)
    "exception": (30, "attributed", "application", "exception", True),
    "cuda_oom": (30, "attributed", "application", "cuda_oom", True),
    "collective_mismatch": (12, "attributed", "application", "collective_mismatch", True),
    "watchdog_unknown": (12, "unattributed", None, None, False),           # NCCL watchdog timeouts, nothing else
    "ambiguous": (15, "ambiguous", "hardware", "ambiguous", False),        # two GPU faults, same second, two nodes
    # shapes of real clusters beyond the Llama 3 table (docs/accuracy.md, tests/corpus/): weight 0 by default, so the
    # default fleets (and the fleet benchmark's pinned profile) stay exactly as they were; REAL_SHAPES turns them on
    "host_oom": (0, "attributed", "application", "host_oom", True),        # cgroup OOM kill, then a DataLoader death
    "filesystem": (0, "attributed", "software", "filesystem", True),       # journal aborted, read-only remount, EROFS
    "kernel_panic": (0, "attributed", "software", "kernel", True),         # hung-task panic, the node goes silent
    "nan": (0, "attributed", "application", "nan", True),                  # NaN in the gradients on every rank
    "node_vanished": (0, "attributed", "infrastructure", "node_failure", True),  # peers' resets, no scheduler message
    # a root of the message catalogue, written as its rendered example line; the truth is that entry's class
    "catalogue": (0, "attributed", None, None, True),
}
#: weights that add the real shapes to a fleet: `simulate(..., weights=REAL_SHAPES)`
REAL_SHAPES = {"host_oom": 20, "filesystem": 15, "kernel_panic": 10, "nan": 15, "node_vanished": 10}
#: weights that make every attempt's fault a catalogue root (every family with one): `weights=CATALOGUE_SHAPES`
CATALOGUE_SHAPES = {**{kind: 0 for kind in FAULTS}, "catalogue": 1}
HARDWARE = {"gpu_lost", "gpu_nvlink", "gpu_firmware", "gpu_memory"}
NEEDS_PEERS = {"ib_link", "nic", "ambiguous", "node_vanished"}


@dataclass
class Fleet:
    nodes: list[str]
    topology: dict[str, dict]
    lemons: list[str]
    bad_port_node: str


@dataclass
class Job:
    workload: str
    nodes: list[str]
    gpu_model: str


def _fleet(rng: random.Random, n: int, lemons: int = 2) -> Fleet:
    nodes = [f"gpu-{i:04d}" for i in range(1, n + 1)]
    topology = {node: {"switch": f"leaf-{i // 16 + 1:02d}", "port": i % 16 + 1} for i, node in enumerate(nodes)}
    picks = rng.sample(nodes, min(lemons + 1, n))
    return Fleet(nodes, topology, picks[:lemons], picks[-1])


#: nodes per job -> weight, when `simulate` is given no `job_sizes`
JOB_SIZES = {1: 18, 2: 30, 4: 22, 8: 14, 16: 8, 32: 5, 64: 3}


def _job_size(rng: random.Random, limit: int, sizes: dict[int, float] | None = None) -> int:
    sizes = sizes or JOB_SIZES
    size = rng.choices(list(sizes), weights=list(sizes.values()))[0]
    return max(1, min(size, limit))


def _ip(s: Scenario, node: str) -> str:
    return s.ip(node)


def _peers_fail_towards(s: Scenario, rng: random.Random, culprit: str, at: datetime, reporters: list[str] | None = None) -> None:
    """NCCL NET/IB completion errors on the peers of `culprit` (fan-in: many reporters, one peer); `reporters`: which
    peers report (default: up to six drawn at random)."""
    if reporters is None:
        others = [n for n in s.nodes if n != culprit]
        reporters = rng.sample(others, min(len(others), 6))
    for i, node in enumerate(reporters):
        local = rng.randrange(GPUS)
        t = at + timedelta(seconds=5 + i, milliseconds=rng.randrange(900))
        s.nccl_warn(t, node, local, f"NET/IB : Got completion from peer {_ip(s, culprit)}<{40000 + rng.randrange(20000)}> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{_ip(s, node)} remoteGids::ffff:{_ip(s, culprit)}")
        s.nccl_warn(t + timedelta(milliseconds=200), node, local, f"NET/IB : Got completion from peer {_ip(s, culprit)}<{40000 + rng.randrange(20000)}> with status=5 opcode=32656 len=32659 vendor err 249 (Recv) localGid ::ffff:{_ip(s, node)} remoteGids::ffff:{_ip(s, culprit)}")


def _socket_resets(s: Scenario, rng: random.Random, culprit: str, at: datetime, reporters: list[str] | None = None) -> None:
    """NCCL socket receive failures towards `culprit`; `reporters`: which peers report (default: up to four at random)."""
    if reporters is None:
        others = [n for n in s.nodes if n != culprit]
        reporters = rng.sample(others, min(len(others), 4))
    for i, node in enumerate(reporters):
        s.nccl_warn(at + timedelta(seconds=2 + i), node, rng.randrange(GPUS),
                    f"Net : Call to recv from {_ip(s, culprit)}<{50000 + rng.randrange(10000)}> failed : Connection reset by peer", "misc/socket.cc:518")


def _cascade(s: Scenario, rng: random.Random, at: datetime, seq: int) -> None:
    """Watchdog timeouts on every rank about ten minutes after the failure."""
    ranks = list(range(len(s.nodes) * GPUS))
    s.watchdog_cascade(at + timedelta(minutes=10, seconds=rng.randrange(3)), ranks, seq=seq)


def _torchrun(s: Scenario, at: datetime, node: str, local: int, exitcode: int) -> None:
    r = s.rank(node, local)
    pid = 2380000 + r
    s.plain(at, r, f"[{at:%Y-%m-%d %H:%M:%S},004] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: {exitcode}) local_rank: {local} (pid: {pid}) of binary: /usr/bin/python3")


def _root_kern(s: Scenario, roots: list[str], node: str, at: datetime, text: str) -> None:
    s.kern(node, at, text)
    roots.append(text)


def _root_app(s: Scenario, roots: list[str], at: datetime, rank: int, text: str) -> None:
    s.plain(at, rank, text)
    roots.append(text)


def _traceback(s: Scenario, roots: list[str], at: datetime, r: int, last: str, frames: list[str]) -> None:
    for text in ["Traceback (most recent call last):", *frames]:
        s.plain(at, r, f"[rank{r}]: {text}")
    _root_app(s, roots, at, r, f"[rank{r}]: {last}")


def _gpu_xid(s: Scenario, rng: random.Random, roots: list[str], kind: str, node: str, local: int, at: datetime, gpu_model: str) -> None:
    bus = BUS_IDS[local]
    pci = f"PCI:0000:{bus}:00"
    if kind == "gpu_lost":
        s.kern(node, at - timedelta(seconds=1), f"NVRM: GPU at {pci}: GPU-{rng.getrandbits(32):08x}-c55b-d076-fa0e-d464e4c7e08b")
        _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
        s.kern(node, at, f"NVRM: GPU 0000:{bus}:00.0: GPU has fallen off the bus.")
    elif kind == "gpu_nvlink":
        if gpu_model == "B200":
            _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 149, NETIR_LINK_EVT Fatal XC0 i0 Link {rng.randrange(18):02d} (0x00a001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
        else:
            _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link {rng.randrange(18)}(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)")
        s.kern(node, at + timedelta(seconds=2), f"NVRM: Xid ({pci}): 45, pid={1818000 + local}, name=python3, Ch 00000001 caused by previous Xid {149 if gpu_model == 'B200' else 74}")
    elif kind == "gpu_firmware":
        _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 119, pid={2024000 + rng.randrange(999)}, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU{local} GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).")
        s.kern(node, at, f"NVRM: GPU{local} GSP RPC buffer contains function 103 (GSP_RM_ALLOC) and data 0x0000000000002081 0x0000000000000004.")
    else:  # gpu_memory
        variant = rng.choice(("48", "95", "94"))
        if variant == "48":
            _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fdf{rng.randrange(65536):04x}0 partition {rng.randrange(8)}, subpartition 1")
        elif variant == "95":
            _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 95, pid={7000 + rng.randrange(999)}, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No")
        else:
            _root_kern(s, roots, node, at, f"NVRM: Xid ({pci}): 94, pid={7000 + rng.randrange(999)}, Contained: CE User Channel (0x9). RST: No, D-RST: No")
        s.kern(node, at + timedelta(milliseconds=3), f"NVRM: Xid ({pci}): 63, pid={7000 + rng.randrange(999)}, Row Remapper: New row marked for remapping, reset gpu to activate")
        s.kern(node, at + timedelta(milliseconds=5), f"NVRM: Xid ({pci}): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")


def _build(kind: str, s: Scenario, rng: random.Random, gpu_model: str, culprit: str | None, second: str | None) -> tuple[list[str], list[str], dict]:
    """Inject the fault; return (culprit nodes, root lines as written, context overrides)."""
    roots: list[str] = []
    at = s.start + (s.end - s.start) * rng.uniform(0.5, 0.9)
    at = at.replace(microsecond=rng.randrange(1000) * 1000)
    seq = rng.randrange(500, 90000)
    over: dict = {}
    if kind == "success":
        return [], roots, over
    if kind == "time_limit":
        s.plain(s.end - timedelta(seconds=1), 0, f"slurmstepd: error: *** JOB {rng.randrange(10**6, 10**7)} ON {s.nodes[0]} CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***")
        roots.append("DUE TO TIME LIMIT ***")
        s.plain(s.end, 0, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
        return [], roots, {"state": "TIMEOUT", "exit_code": "0:15"}
    if kind == "cancelled":
        s.plain(s.end, 0, f"slurmstepd: error: *** JOB {rng.randrange(10**6, 10**7)} ON {s.nodes[0]} CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} ***")
        roots.append(f"CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} ***")
        return [], roots, {"state": "CANCELLED", "exit_code": "0:15"}
    if kind == "preemption":
        s.plain(s.end, 0, f"slurmstepd: error: *** JOB {rng.randrange(10**6, 10**7)} ON {s.nodes[0]} CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} DUE TO PREEMPTION ***")
        roots.append("DUE TO PREEMPTION ***")
        return [], roots, {"state": "PREEMPTED", "exit_code": "0:15"}
    if kind == "node_failure":
        s.end = at + timedelta(seconds=40)
        _root_app(s, roots, at + timedelta(seconds=35), 0, f"srun: error: Node failure on {culprit}")
        s.plain(at + timedelta(seconds=40), 0, f"slurmstepd: error: *** JOB {rng.randrange(10**6, 10**7)} ON {s.nodes[0]} CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
        _socket_resets(s, rng, culprit, at)
        s.kernel[culprit] = [(t, x) for t, x in s.kernel.get(culprit, []) if t < at]  # the node went silent
        s.silent_after = {culprit: at}
        return [culprit], roots, {"state": "NODE_FAIL", "exit_code": "0:0"}
    if kind in HARDWARE:
        local = rng.randrange(GPUS)
        _gpu_xid(s, rng, roots, kind, culprit, local, at, gpu_model)
        r = s.rank(culprit, local)
        if kind == "gpu_memory":
            s.plain(at + timedelta(seconds=1), r, f"[rank{r}]: RuntimeError: CUDA error: uncorrectable ECC error encountered")
        elif kind == "gpu_nvlink":
            s.nccl_warn(at + timedelta(seconds=2), culprit, local, "Cuda failure 'an uncorrectable NVLink error was detected during the execution'", "enqueue.cc:1512")
        else:
            s.plain(at + timedelta(seconds=2), r, f"[rank{r}]: RuntimeError: CUDA error: unspecified launch failure")
        if len(s.nodes) > 1:
            (_peers_fail_towards if rng.random() < 0.5 else _socket_resets)(s, rng, culprit, at + timedelta(seconds=2))
        _cascade(s, rng, at, seq)
        if rng.random() < 0.4:
            _torchrun(s, at + timedelta(minutes=10, seconds=5), culprit, local, -6)
        return [culprit], roots, {}
    if kind == "ambiguous":
        for node, k in ((culprit, "gpu_lost"), (second, "gpu_memory")):
            _gpu_xid(s, rng, roots, k, node, rng.randrange(GPUS), at + timedelta(milliseconds=rng.randrange(800)), gpu_model)
        _cascade(s, rng, at, seq)
        return sorted([culprit, second]), roots, {}
    if kind == "ib_link":
        dev = f"0000:{rng.choice(['5e', '1a', 'c1', '9d'])}:00.0"
        if rng.random() < 0.5:
            _root_kern(s, roots, culprit, at, f"mlx5_core {dev}: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 0, Cable error, Bad or shorted cable/module")
            s.kern(culprit, at + timedelta(milliseconds=30), "systemd-networkd[1021]: ib0: Lost carrier")
        else:
            _root_kern(s, roots, culprit, at, "systemd-networkd[1021]: ib0: Lost carrier")
        _peers_fail_towards(s, rng, culprit, at)
        _cascade(s, rng, at, seq)
        return [culprit], roots, {}
    if kind == "nic":
        dev = f"0000:{rng.choice(['5e', '1a', 'c1', '9d'])}:00.0"
        _root_kern(s, roots, culprit, at, f"mlx5_core {dev}: poll_health:801:(pid 0): device's health compromised - reached miss count")
        s.kern(culprit, at + timedelta(microseconds=26), f"mlx5_core {dev}: print_health_info:431:(pid 0): Health issue observed, firmware internal error, severity(3) ERROR:")
        _peers_fail_towards(s, rng, culprit, at)
        _cascade(s, rng, at, seq)
        return [culprit], roots, {}
    if kind == "nccl_segfault":
        local = rng.randrange(GPUS)
        _root_kern(s, roots, culprit, at, f"pt_main_thread[{2536000 + local}]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]")
        if len(s.nodes) > 1:
            _socket_resets(s, rng, culprit, at)
        _torchrun(s, at + timedelta(seconds=6), culprit, local, -11)
        _cascade(s, rng, at, seq)
        return [culprit], roots, {}
    if kind in ("exception", "cuda_oom"):
        r = s.rank(culprit, rng.randrange(GPUS))
        if kind == "exception":
            _traceback(s, roots, at, r, rng.choice(("ValueError: corrupt shard /data/shard-00042.jsonl", "KeyError: 'input_ids'",
                                                     "AssertionError: sequence length 8193 exceeds max_position_embeddings 8192")),
                       ['  File "/workspace/train.py", line 301, in <module>', "    batch = next(it)"])
        else:
            _traceback(s, roots, at, r, f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {rng.uniform(1, 30):.2f} GiB. GPU {r % GPUS} has a total capacity of 79.15 GiB of which 12.73 GiB is free. Including non-PyTorch memory, this process has 66.40 GiB memory in use.",
                       ['  File "/workspace/train.py", line 412, in <module>', "    loss = model(batch).loss"])
        s.plain(at + timedelta(seconds=1), r, f"srun: error: {culprit}: task {r}: Exited with exit code 1")
        if len(s.nodes) > 1 and rng.random() < 0.5:
            _cascade(s, rng, at, seq)
        return [culprit], roots, {}
    if kind == "collective_mismatch":
        n_ranks = len(s.nodes) * GPUS
        ranks = list(range(n_ranks))  # every rank times out; one of them waits in a different collective
        bad = s.rank(culprit, rng.randrange(GPUS))
        t = at + timedelta(minutes=10)
        for i, r in enumerate(ranks):
            op, numel = ("BROADCAST", 5056) if r == bad else ("ALLREDUCE", 2106881)
            text = f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for {600013 + i} milliseconds before timing out."
            s.glog(t + timedelta(milliseconds=29 * i), r, "E", "ProcessGroupNCCL.cpp:607", text)
            if r == bad:
                roots.append(text)
        return [culprit], roots, {}
    if kind == "watchdog_unknown":
        _cascade(s, rng, at, seq)
        s.plain(s.end - timedelta(seconds=5), 0, "terminate called after throwing an instance of 'c10::DistBackendError'")
        return [], roots, {"exit_code": "6:0"}
    if kind == "catalogue":
        return _build_catalogue(s, rng, culprit, at, seq)
    return _build_real_shape(kind, s, rng, culprit, at, seq)


@functools.cache
def catalogue_roots() -> dict[str, list[tuple[Message, Example]]]:
    """Family (catalogue file) -> its root entries a fleet can write: a one-line rendered example without a stamp of
    its own (the writers stamp it), in the application or kernel log, not naming its culprit as a peer's address."""
    picks = [(m, x) for m in load_catalogue() if m.role == "root" and m.source in ("applog", "syslog") and m.scope != "peer"
             for x in [first_rendered(m)] if x is not None and len(x.lines) == 1]
    events = events_from_lines([x.lines[0] for _, x in picks], "applog", node=LINE_NODE)
    stamped = set(events.filter(events["ts_quality"] != "inherited").drop_nulls("ts")["line"].to_list())
    roots: dict[str, list[tuple[Message, Example]]] = {}
    for i, (m, x) in enumerate(picks, start=1):
        if i not in stamped:
            roots.setdefault(m.file, []).append((m, x))
    return roots


def _build_catalogue(s: Scenario, rng: random.Random, culprit: str, at: datetime, seq: int) -> tuple[list[str], list[str], dict]:
    """A family, then one of its roots: its line on the culprit (kernel log or the culprit's rank), the cascade after."""
    roots = catalogue_roots()
    m, x = rng.choice(roots[rng.choice(sorted(roots))])
    return place_catalogue_root(s, rng, m, x, culprit, at, seq)


def place_catalogue_root(s: Scenario, rng: random.Random, m: Message, x: Example, culprit: str, at: datetime,
                         seq: int) -> tuple[list[str], list[str], dict]:
    """A catalogue root entry's one-line example on the culprit (its kernel log, or one of its ranks), the cascade
    after; its truth is the entry's class."""
    line = re.sub(rf"\b{LINE_NODE}\b", culprit, x.lines[0])  # the render test's culprit node is this attempt's
    if m.source == "syslog":
        _root_kern(s, [], culprit, at, line)
    else:
        _root_app(s, [], at, s.rank(culprit, rng.randrange(GPUS)), line)
    _cascade(s, rng, at, seq)
    domain, subdomain = m.cls.split("/")
    return ([] if m.scope == "job" else [culprit]), [line], {"class": (domain, subdomain), "catalogue": m.id}


def _build_real_shape(kind: str, s: Scenario, rng: random.Random, culprit: str, at: datetime, seq: int) -> tuple[list[str], list[str], dict]:
    """The REAL_SHAPES kinds, written in the line shapes of the public reports of tests/corpus/."""
    roots: list[str] = []
    local = rng.randrange(GPUS)
    r = s.rank(culprit, local)
    if kind == "host_oom":  # the kernel kills a worker; the first Python error is the DataLoader's, a side effect
        pid = 2536000 + r
        _root_kern(s, roots, culprit, at, f"Memory cgroup out of memory: Killed process {pid} (python3) total-vm:{rng.randrange(50, 90) * 1048576}kB, anon-rss:{rng.randrange(30, 60) * 1048576}kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69068kB oom_score_adj:0")
        s.kern(culprit, at + timedelta(milliseconds=400), f"oom_reaper: reaped process {pid} (python3), now anon-rss:0kB, file-rss:74732kB, shmem-rss:12296kB")
        for text in ("Traceback (most recent call last):",
                     '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/signal_handling.py", line 66, in handler',
                     "    _error_if_any_worker_fails()", f"RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Killed."):
            s.plain(at + timedelta(seconds=1), r, f"[rank{r}]: {text}")
        s.plain(at + timedelta(seconds=2), r, f"srun: error: {culprit}: task {r}: Killed")
    elif kind == "filesystem":  # the checkpoint disk fails under torch.save
        dev = rng.choice(("nvme0n1p1", "md127p3", "sdb1"))
        _root_kern(s, roots, culprit, at, f"EXT4-fs error (device {dev}): ext4_journal_check_start:83: comm python3: Detected aborted journal")
        s.kern(culprit, at + timedelta(milliseconds=5), f"EXT4-fs ({dev}): Remounting filesystem read-only")
        for text in ("Traceback (most recent call last):", '  File "/workspace/checkpointing.py", line 412, in save_checkpoint',
                     "    torch.save(state_dict, checkpoint_name)",
                     f"OSError: [Errno 30] Read-only file system: '/checkpoints/iter_{rng.randrange(1000, 99999):07d}/mp_rank_00/model_optim_rng.pt'"):
            s.plain(at + timedelta(seconds=1), r, f"[rank{r}]: {text}")
        s.plain(at + timedelta(seconds=2), r, f"srun: error: {culprit}: task {r}: Exited with exit code 1")
    elif kind == "kernel_panic":  # the node's kernel stops; its peers lose their connections to it
        _root_kern(s, roots, culprit, at, "Kernel panic - not syncing: hung_task: blocked tasks")
        s.kern(culprit, at, f"CPU: {rng.randrange(96)} PID: 1364 Comm: khungtaskd Tainted: P           OE     5.15.0-1053-nvidia #54-Ubuntu")
        s.silent_after = {culprit: at + timedelta(seconds=1)}
        if len(s.nodes) > 1:
            _socket_resets(s, rng, culprit, at + timedelta(seconds=20))
    elif kind == "nan":  # the loss diverges on every data-parallel rank: the job's, no culprit node
        for rank in sorted(rng.sample(range(len(s.nodes) * GPUS), min(4, len(s.nodes) * GPUS))):
            _root_app(s, roots, at, rank, f"[rank{rank}]: AssertionError: Rank {rank}: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: {rank % GPUS}")
        s.plain(at + timedelta(seconds=1), 0, f"srun: error: {s.nodes[0]}: tasks 0-{GPUS - 1}: Exited with exit code 1")
        return [], roots, {}
    elif kind == "node_vanished":  # no scheduler message: only the peers' resets name the node
        _socket_resets(s, rng, culprit, at)
        roots.append(s.app[-1][1])
        s.kernel[culprit] = [(t, x) for t, x in s.kernel.get(culprit, []) if t < at]
        s.silent_after = {culprit: at}
    else:
        raise ValueError(kind)
    _cascade(s, rng, at, seq)
    return [culprit], roots, {}


#: the kinds whose job trains on until the scheduler ends it or it completes: progress markers run to the end
TRAINS_UNTIL_THE_END = frozenset({"success", "time_limit", "cancelled", "preemption"})


def line_times(s: Scenario) -> set[datetime]:
    """Every line time written so far (a set: what a step adds is the difference)."""
    return {t for t, _ in s.app} | {t for lines in s.kernel.values() for t, _ in lines}


def _noise(s: Scenario, rng: random.Random, lines: int, trains_to_end: bool, progress_until: datetime | None = None) -> None:
    """INFO chatter, training progress, correctable AER and benign mlx5 lines. Progress markers are spread evenly over
    the run, the last one a step before the end; `trains_to_end` (a job stopped while still training) adds one a
    minute before the end; `progress_until` (when the job stopped making progress) drops the markers after it."""
    s.nccl_init(s.start + timedelta(seconds=30))
    span = (s.end - s.start).total_seconds()
    steps = max(5, lines - len(s.app))
    for k in range(1, steps + trains_to_end):
        at = s.start + timedelta(seconds=60 + (span - 120) * k / steps)
        if progress_until is None or at < progress_until:
            s.iteration(at, 10 * k)
    for node in s.nodes:
        if rng.random() < 0.15:
            t = s.start + timedelta(seconds=rng.uniform(60, span - 60))
            s.kern(node, t, "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0")
            s.kern(node, t, "pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)")
        if rng.random() < 0.1:
            s.kern(node, s.start + timedelta(seconds=rng.uniform(60, span - 60)), "mlx5_core 0000:5e:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)")


def silence(s: Scenario) -> None:
    """Drop what a node that went silent (`s.silent_after`) would have written to its kernel log after that."""
    for node, t in s.silent_after.items():
        s.kernel[node] = [(x, y) for x, y in s.kernel.get(node, []) if x < t]


def _pad(s: Scenario, rng: random.Random, target: int) -> None:
    """Benign training chatter (NCCL INFO channel/transport setup, ProcessGroupNCCL warnings, iteration lines) until the
    app log holds roughly `target` more bytes; placed before any injected fault (faults fall at 50-90 % of the run)."""
    span = (s.end - s.start).total_seconds()
    lo, hi = 60.0, max(61.0, span * 0.45)
    n_ranks = len(s.nodes) * GPUS
    written = 0
    it = 0
    while written < target:
        at = s.start + timedelta(seconds=rng.uniform(lo, hi))
        r = rng.randrange(n_ranks)
        node, local = s.node_of(r), r % GPUS
        choice = rng.random()
        if choice < 0.55:
            text = (f"{r}: {node}:{4100 + s.nodes.index(node)}:{4300 + local} [{local}] NCCL INFO Channel {rng.randrange(32):02d}/0 : "
                    f"{r}[{local}] -> {(r + 1) % n_ranks}[{(local + 1) % GPUS}] via P2P/IPC/read")
            s.app.append((at, text))
        elif choice < 0.75:
            s.glog(at, r, "W", "ProcessGroupNCCL.cpp:4561", f"[PG ID 0 PG GUID 0 Rank {r}] using GPU {local} as device used by this process is currently unknown.")
            text = s.app[-1][1]
        else:
            it += 1
            s.iteration(at, it)
            text = s.app[-1][1]
        written += len(text) + 1


@dataclass(frozen=True)
class _Padding:
    """Bytes of benign lines added to each attempt's application log and to each of its nodes' kernel logs."""
    app_bytes: int
    kernel_bytes: int


#: benign system chatter of a node's kernel log (syslog as journald forwards it): none of it an extraction trigger
KERNEL_CHATTER = (
    "systemd[1]: Started Session {n} of User root.",
    "systemd-logind[1456]: New session {n} of user slurm.",
    "systemd-logind[1456]: Removed session {n}.",
    'audit: type=1400 audit(1762164672.{ms:03d}:{n}): apparmor="STATUS" operation="profile_replace" profile="unconfined" name="nvidia_modprobe" pid={pid} comm="apparmor_parser"',
    "kauditd_printk_skb: {k} callbacks suppressed",
    "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate to 79750",
    "docker0: port 1(veth{h:07x}) entered forwarding state",
    "CRON[{pid}]: (root) CMD (/usr/lib/prometheus-node-exporter/textfile.sh > /dev/null)",
    "chronyd[1122]: Selected source 10.0.0.2 (ntp1.cluster.local)",
    "rsyslogd: imjournal: {n} messages lost due to rate-limiting",
    "sshd[{pid}]: Accepted publickey for slurm from 10.0.0.1 port {port} ssh2: ED25519 SHA256:q8Zk3",
    "sshd[{pid}]: pam_unix(sshd:session): session opened for user slurm(uid=990) by (uid=0)",
    "slurmd[2210]: launch task StepId={n}.0 request from UID:1000 GID:1000 HOST:10.0.0.1 PORT:{port}",
)


def _pad_kernels(s: Scenario, rng: random.Random, target: int) -> None:
    """Benign chatter in every node's kernel log until it holds roughly `target` more bytes, placed before any
    injected fault (faults fall at 50-90 % of the run, as for _pad)."""
    span = (s.end - s.start).total_seconds()
    lo, hi = 60.0, max(61.0, span * 0.45)
    for node in s.nodes:
        written = 0
        while written < target:
            text = rng.choice(KERNEL_CHATTER).format(n=rng.randrange(10**6), ms=rng.randrange(1000), pid=rng.randrange(10**6),
                                                     k=rng.randrange(2, 40), h=rng.getrandbits(28), port=rng.randrange(32768, 61000))
            s.kern(node, s.start + timedelta(seconds=rng.uniform(lo, hi)), text)
            written += len(text) + 45  # the stamp, node and monotonic clock a syslog line carries besides the text


def simulate(out: str | Path, *, nodes: int = 256, attempts: int = 500, days: int = 7, seed: int = 0,
             lines: tuple[int, int] = (150, 1500), lemons: int = 2, lemon_share: float = 0.25,
             bad_port_share: float = 0.5, weights: dict[str, float] | None = None, pad_bytes: int = 0,
             max_job_nodes: int = 0, metrics: bool = False, requeue_share: float = 0.0,
             job_sizes: dict[int, float] | None = None, kernel_pad_bytes: int = 0) -> Path:
    """Write a simulated fleet under `out`; return the path of truth.jsonl.

    Repeat offenders: `lemons` lemon nodes take a hardware fault's blame with probability `lemon_share`; the node
    behind the bad switch port takes an ib_link fault's blame with probability `bad_port_share` (both recorded in
    DIR/fleet_truth.json). `weights` overrides FAULTS weights per kind (e.g. {"ib_link": 150} so that a small fleet
    still sees several link faults). `pad_bytes` pads each attempt's app log with ~that many bytes of benign noise
    lines (for benchmarks: volume without more attempts). `max_job_nodes` caps a job's size (0: the fleet's size;
    small jobs make small, fast fleets for tests). `metrics` writes each attempt's metrics file (synthetic/metrics.py:
    GPU temperature, Xid, ECC and NVLink counters, IB link counters, moved by the injected hardware and link faults).
    `requeue_share` is the share of failed jobs that Slurm's requeue or a restart script runs again (attempts 1, 2,
    ..., each with its own truth row; see `_requeue`). `job_sizes` (nodes -> weight) replaces JOB_SIZES, the mix of
    job sizes. `kernel_pad_bytes` pads each node's kernel log with ~that many bytes of benign system chatter (real
    fleets: many kernel logs of some 20 KB each). The defaults (no metrics, no requeues, no kernel padding)
    reproduce the original fleets exactly: those options draw from random streams of their own. An interrupted or failed run into a new
    folder removes it: nothing half-written is left to be mistaken for a fleet."""
    out = Path(out)
    fresh = not out.exists()
    try:
        return _write_fleet(out, nodes, attempts, days, seed, lines, lemons, lemon_share, bad_port_share, weights,
                            _Padding(pad_bytes, kernel_pad_bytes), max_job_nodes, metrics, requeue_share, job_sizes)
    except BaseException:
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _write_fleet(out: Path, nodes: int, attempts: int, days: int, seed: int, lines: tuple[int, int], lemons: int,
                 lemon_share: float, bad_port_share: float, weights: dict[str, float] | None, padding: _Padding,
                 max_job_nodes: int, metrics: bool, requeue_share: float, job_sizes: dict[int, float] | None) -> Path:
    rng = random.Random(seed)
    pad_rng = random.Random(f"pad-{seed}")  # its own stream: padding never shifts the faults of a seed
    fleet = _fleet(rng, nodes, lemons)
    (out / "catalog").mkdir(parents=True, exist_ok=True)
    (out / "topology.yaml").write_text(yaml.safe_dump({"nodes": fleet.topology}, sort_keys=True), encoding="utf-8")
    port = fleet.topology[fleet.bad_port_node]
    (out / "fleet_truth.json").write_text(json.dumps({
        "lemon_nodes": sorted(fleet.lemons),
        "bad_port": {"switch": port["switch"], "port": port["port"], "node": fleet.bad_port_node},
    }, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    kinds = list(FAULTS)
    unknown = set(weights or {}) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown fault kinds in weights: {sorted(unknown)}")
    weights = [(weights or {}).get(k, FAULTS[k][0]) for k in kinds]
    truth_lines = []
    written = progress.Stage("simulate: write", attempts, "attempts")
    for i in range(attempts):
        written.advance()
        kind = rng.choices(kinds, weights)[0]
        size = _job_size(rng, max_job_nodes or nodes, job_sizes)
        if kind in NEEDS_PEERS:
            size = max(size, 2)
        job_nodes = sorted(rng.sample(fleet.nodes, min(size, nodes)))
        # repeat offenders: lemons draw hardware faults, the node behind the bad port draws link faults
        culprit = rng.choice(job_nodes)
        if kind in HARDWARE and rng.random() < lemon_share and fleet.lemons:
            culprit = rng.choice(fleet.lemons)
        elif kind == "ib_link" and rng.random() < bad_port_share:
            culprit = fleet.bad_port_node
        if culprit not in job_nodes:
            job_nodes[rng.randrange(len(job_nodes))] = culprit
            job_nodes = sorted(set(job_nodes))
        second = rng.choice([n for n in job_nodes if n != culprit]) if kind == "ambiguous" else None
        gpu_model = rng.choices([m for m, _ in GPU_MODELS], [w for _, w in GPU_MODELS])[0]
        start = T0 + timedelta(seconds=rng.uniform(0, days * 86400))
        start = start.replace(microsecond=0)
        end = start + timedelta(minutes=rng.uniform(30, 240))
        job = Job(f"job-{i:05d}", job_nodes, gpu_model)
        first, end = _write_attempt(out, job, 0, kind, culprit, second, start, end, rng, lines, pad_rng, padding, metrics, seed)
        truth_lines.append(first)
        requeues = random.Random(f"requeue-{seed}-{i}")  # its own stream: requeues never shift the first attempts
        if requeues.random() < requeue_share:
            truth_lines += _requeue(out, fleet, job, first, end, requeues, kinds, weights, lines, metrics, seed)
    path = out / "truth.jsonl"
    path.write_text("".join(json.dumps(t, sort_keys=True) + "\n" for t in truth_lines), encoding="utf-8")
    written.close(ok=True)
    return path


def _write_attempt(out: Path, job: Job, attempt: int, kind: str, culprit: str, second: str | None, start: datetime,
                   end: datetime, rng: random.Random, lines: tuple[int, int], pad_rng: random.Random, padding: _Padding,
                   metrics: bool, seed: int) -> tuple[dict, datetime]:
    """Inject `kind` into one attempt of `job`, write its folder; return its truth row and its end."""
    s = Scenario(job.workload, job.nodes, start, end.replace(microsecond=0), "FAILED", "1:0", kernel_format=rng.choice(KERNEL_FORMATS))
    s.skew = {n: rng.uniform(-2.0, 2.0) for n in job.nodes}
    if rng.random() < 0.05:  # occasionally one node's clock is well off
        s.skew[rng.choice(job.nodes)] = rng.choice((-1, 1)) * rng.uniform(5, 30)
    s.silent_after = {}
    before = line_times(s)
    culprits, roots, over = _build(kind, s, rng, job.gpu_model, culprit, second)
    # a failed job makes no progress after its fault's first line
    fault_at = None if kind in TRAINS_UNTIL_THE_END else min(line_times(s) - before, default=None)
    if kind == "success":
        over = {"state": "COMPLETED", "exit_code": "0:0"}
    _noise(s, rng, rng.randint(*lines), trains_to_end=kind == "time_limit", progress_until=fault_at)
    if padding.app_bytes > 0:
        _pad(s, pad_rng, padding.app_bytes)
    if padding.kernel_bytes > 0:
        _pad_kernels(s, random.Random(f"kernel-pad-{seed}-{job.workload}-{attempt}"), padding.kernel_bytes)
    silence(s)
    day = f"{start:%Y-%m-%d}"
    folder = out / "catalog" / day / f"{job.workload}-{attempt}"
    metrics_text = metrics_csv(s, roots, random.Random(f"metrics-{seed}-{job.workload}-{attempt}")) if metrics else None
    write_attempt(folder, s, workload=job.workload, cluster=CLUSTER, gpu_model=job.gpu_model, attempt=attempt,
                  state=over.get("state", s.state), exit_code=over.get("exit_code", s.exit_code), metrics=metrics_text)
    _, verdict, domain, subdomain, attributable = FAULTS[kind]
    domain, subdomain = over.get("class", (domain, subdomain))
    return {
        "attempt_id": f"{CLUSTER}/{job.workload}/{attempt}", "spec": str(Path("catalog") / day / f"{job.workload}-{attempt}" / "attempt.yaml"),
        "kind": kind, **({"catalogue": over["catalogue"]} if "catalogue" in over else {}), "verdict": verdict, "domain": domain, "subdomain": subdomain,
        "culprit_nodes": culprits, "attributable": attributable, "gpu_model": job.gpu_model, "nodes": len(job.nodes),
        "root_lines": roots, "max_abs_skew_s": round(max(abs(v) for v in s.skew.values()), 3),
    }, s.end


def _requeue(out: Path, fleet: Fleet, job: Job, failed: dict, end: datetime, rng: random.Random, kinds: list[str],
             weights: list[float], lines: tuple[int, int], metrics: bool, seed: int) -> list[dict]:
    """Attempts 1, 2, ... of a failed job, as Slurm's requeue or a restart script runs them: on the same nodes, except
    a node blamed for an infrastructure, hardware or network fault, which is drained and replaced. An application
    fault comes back (the bug is still there); otherwise the job mostly runs through. Stops at a success or a cancel."""
    rows = [failed]
    for attempt in range(1, 1 + rng.randint(1, 2)):
        last = rows[-1]
        if last["verdict"] == "not_failed" or last["kind"] == "cancelled":
            break
        nodes = list(job.nodes)
        for node in last["culprit_nodes"] if last["domain"] in ("infrastructure", "hardware", "network") else ():
            nodes[nodes.index(node)] = rng.choice([n for n in fleet.nodes if n not in nodes])
        job = Job(job.workload, sorted(nodes), job.gpu_model)
        if last["domain"] == "application":
            kind = last["kind"]
        elif rng.random() < 0.6:
            kind = "success"
        else:
            kind = rng.choices([k for k in kinds if len(nodes) > 1 or k not in NEEDS_PEERS],
                               [w for k, w in zip(kinds, weights) if len(nodes) > 1 or k not in NEEDS_PEERS])[0]
        culprit = rng.choice(job.nodes)
        second = rng.choice([n for n in job.nodes if n != culprit]) if kind == "ambiguous" else None
        start = (end + timedelta(seconds=rng.uniform(60, 600))).replace(microsecond=0)
        row, end = _write_attempt(out, job, attempt, kind, culprit, second, start, start + timedelta(minutes=rng.uniform(30, 240)),
                                  rng, lines, rng, _Padding(0, 0), metrics, seed)
        rows.append(row)
    return rows[1:]


def read_truth(directory: str | Path) -> list[dict]:
    path = Path(directory) / "truth.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def attribute_fleet(directory: str | Path, warehouse: str | Path | None = None, lake: str | Path | None = None, batch: int = 100) -> str:
    """Land, attribute and load every simulated attempt with run_attempts in batches; return the warehouse path."""
    root = Path(directory).resolve()
    config = Config(lake=LakeSettings(root=str(Path(lake).resolve() if lake else root / "lake")),
                    warehouse=WarehouseSettings(path=str(Path(warehouse).resolve() if warehouse else root / "firstfault.duckdb")))
    specs = [root / t["spec"] for t in read_truth(root)]
    rules = load_rule_set(config)
    with progress.stage("simulate: attribute", total=len(specs)) as attributed:
        for i in range(0, len(specs), batch):
            run_attempts([load_static_context(str(p)) for p in specs[i:i + batch]], config, flow="simulate", rules=rules)
            attributed.advance(len(specs[i:i + batch]))
    return config.warehouse.path


def evaluate(directory: str | Path, warehouse: str | Path) -> dict:
    """Score the warehouse's verdicts against truth.jsonl (see `firstfault evaluate`)."""
    got = {r[0]: {"verdict": r[1], "domain": r[2], "subdomain": r[3], "culprit_nodes": r[4], "confidence": r[5]}
           for r in verdict_summaries(str(warehouse))}
    return scorecard.score([(t["attempt_id"], _expectation(t), got.get(t["attempt_id"]), []) for t in read_truth(directory)])


def _expectation(t: dict) -> dict:
    """What truth.jsonl scores: every field of an attributable failure, only the verdict of the other attempts."""
    keys = ("verdict", "domain", "subdomain", "culprit_nodes") if t["verdict"] == "attributed" else ("verdict",)
    return {"kind": t["kind"], **{k: t[k] for k in keys}}
