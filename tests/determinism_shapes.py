"""Two 32-node attempts (one kernel log per node, an srun-labelled application log) whose verdicts once depended on
Python's string-hash seed (issue 26), written with the shared line writers of synthetic/logwriters.py.

* `write_roce_attempt`: one node cannot connect its RoCE queue pairs (NCCL's `Call to ibv_modify_qp failed with 110
  Connection timed out … local GID index 3, local GID …, remote GID …`, NVIDIA/nccl#2013's shape) on every GPU; its
  peers print only the cascade (NET/IB retry-exceeded completions towards it, socket resets, watchdog timeouts).
  Right verdict: attributed network/roce on that node.
* `write_vanished_node_attempt`: a NODE_FAIL attempt whose node stops logging first (its kernel and application lines
  end), while one peer reports NET/IB completion errors with status IBV_WC_RETRY_EXC_ERR (12) naming it and others
  lose their sockets to it. Right verdict: attributed infrastructure/node_failure on the vanished node.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from firstfault.synthetic.logwriters import GPUS, Scenario, write_attempt

NODES = [f"gpu-{i:03d}" for i in range(1, 33)]
START = datetime(2026, 11, 29, 1, 0, 0, tzinfo=timezone.utc)
END = START + timedelta(hours=1, minutes=20)
ROCE_NODE = "gpu-013"
VANISHED_NODE = "gpu-021"
RETRY_PEER = "gpu-022"


def _scenario(name: str, end: datetime) -> Scenario:
    s = Scenario(name, list(NODES), START, end, "FAILED", "1:0")
    s.nccl_init(START + timedelta(seconds=30))
    for k in range(1, 30):
        s.iteration(START + timedelta(minutes=2 * k), 10 * k)
    for node in NODES:
        s.kern(node, START + timedelta(seconds=5), "mlx5_core 0000:5e:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)")
    return s


def _modify_qp_timeout(s: Scenario, node: str, local: int, peer: str, at: datetime) -> None:
    s.nccl_warn(at, node, local, f"Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_{local}:1, curr state INIT, "
                f"next state RTR, local GID index 3, local GID ::ffff:{s.ip(node)}, remote GID ::ffff:{s.ip(peer)}", "ibvwrap.c:262")


def _retry_exceeded(s: Scenario, reporter: str, culprit: str, at: datetime, local: int) -> None:
    s.nccl_warn(at, reporter, local, f"NET/IB : Got completion from peer {s.ip(culprit)}<{40000 + local}> with status=12 opcode=0 "
                f"len=0 vendor err 129 (Recv) localGid ::ffff:{s.ip(reporter)} remoteGids::ffff:{s.ip(culprit)}")


def _socket_reset(s: Scenario, reporter: str, culprit: str, at: datetime) -> None:
    s.nccl_warn(at, reporter, 0, f"Net : Call to recv from {s.ip(culprit)}<{50000 + NODES.index(reporter)}> failed : Connection reset by peer",
                "misc/socket.cc:518")


def write_roce_attempt(folder: Path) -> Path:
    at = START + timedelta(minutes=61, seconds=7)
    s = _scenario("roce-qp", END)
    for local in range(GPUS):
        _modify_qp_timeout(s, ROCE_NODE, local, NODES[(NODES.index(ROCE_NODE) + 1 + local) % len(NODES)], at)
    others = [n for n in NODES if n != ROCE_NODE]
    for i, node in enumerate(others[::5]):  # the peers' queue pairs towards it cannot reach RTR either
        _modify_qp_timeout(s, node, i % GPUS, ROCE_NODE, at)
    for i, node in enumerate(others[::5]):
        _retry_exceeded(s, node, ROCE_NODE, at + timedelta(seconds=20, milliseconds=90 * i), i % GPUS)
    for i, node in enumerate(others[2::7]):
        _socket_reset(s, node, ROCE_NODE, at + timedelta(seconds=25, milliseconds=90 * i))
    s.watchdog_cascade(at + timedelta(minutes=10), list(range(len(NODES) * GPUS)), seq=8211)
    return write_attempt(folder, s, workload="roce-qp", cluster="issue26", gpu_model="H100", state="FAILED", exit_code="1:0")


def write_vanished_node_attempt(folder: Path) -> Path:
    at = START + timedelta(minutes=58, seconds=31)
    s = _scenario("node-gone", at + timedelta(seconds=50))
    s.app = [(t, line) for t, line in s.app if t < at or not line.startswith(tuple(f"{s.rank(VANISHED_NODE, g)}: " for g in range(GPUS)))]
    for local in range(3):
        _retry_exceeded(s, RETRY_PEER, VANISHED_NODE, at + timedelta(seconds=14, milliseconds=40 * local), local)
    for i, node in enumerate(["gpu-003", "gpu-009", "gpu-017", "gpu-030"]):
        _socket_reset(s, node, VANISHED_NODE, at + timedelta(seconds=16, milliseconds=90 * i))
    s.plain(at + timedelta(seconds=50), 0, f"slurmstepd: error: *** JOB 4188213 ON {NODES[0]} CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} "
            "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
    s.kernel[VANISHED_NODE] = [(t, x) for t, x in s.kernel.get(VANISHED_NODE, []) if t < at]
    return write_attempt(folder, s, workload="node-gone", cluster="issue26", gpu_model="H100", state="NODE_FAIL", exit_code="0:0")
