"""Line writers shared by the demo (synthetic/demo.py), the fleet simulator (synthetic/simulate.py) and the benchmarks.

A Scenario collects the lines of one attempt in the formats real clusters print: the application log as
`srun --label` prints it (`<rank>: ` prefixes, `[rankN]:` glog lines, NCCL INFO/WARN lines) and one kernel log per
node (syslog without a year, `dmesg -T`, ISO dmesg, raw `dmesg`: seconds since boot only). `skew` (seconds per node, default none) shifts every stamp a node
prints, as a node clock that is off would.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from random import Random

import yaml

GPUS = 8
BUS_IDS = ["18", "2a", "3a", "3b", "9a", "ab", "ba", "db"]  # PCI bus of local GPU 0..7


def megatron_iteration_line(rank: int, i: int, at: datetime, rng: Random) -> str:
    """Megatron-LM's training_log line after a padded srun label (~350 bytes): advancing stamps and varying values,
    so that nothing repeats verbatim (the benchmarks' progress lines)."""
    return (f"{rank}:  [{at:%Y-%m-%d %H:%M:%S}] iteration {i:8d}/ 2000000 | consumed samples: {i * 1024:12d} | "
            f"elapsed time per iteration (ms): {rng.uniform(1800, 2100):.1f} | throughput per GPU (TFLOP/s/GPU): "
            f"{rng.uniform(380, 420):.1f} | learning rate: {3e-4 * rng.uniform(0.5, 1):.6E} | global batch size:  1024 | "
            f"lm loss: {rng.uniform(1.8, 2.6):.6E} | loss scale: 1.0 | grad norm: {rng.uniform(0.2, 1.2):.3f} | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |\n")


@dataclass
class Scenario:
    name: str
    nodes: list[str]
    start: datetime
    end: datetime
    state: str
    exit_code: str
    kernel_format: str = "syslog"  # syslog | dmesg_t | iso | dmesg
    app: list[tuple[datetime, str]] = field(default_factory=list)  # (time, line without stamp handling)
    kernel: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)
    skew: dict[str, float] = field(default_factory=dict)  # node -> seconds its clock is ahead (negative: behind)

    def local(self, node: str, at: datetime) -> datetime:
        """What `node`'s clock reads at true time `at`."""
        return at + timedelta(seconds=self.skew.get(node, 0.0))

    def node_of(self, rank: int) -> str:
        return self.nodes[rank // GPUS]

    def rank(self, node: str, local: int) -> int:
        return self.nodes.index(node) * GPUS + local

    # application log lines ---------------------------------------------------------------------------------
    def nccl_init(self, at: datetime) -> None:
        for node in self.nodes:
            ip = self.ip(node)
            self.app.append((at, f"{self.rank(node, 0)}: {node}:{4100 + self.nodes.index(node)}:{4200} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:{ip}<0>"))
            for local in range(GPUS):
                r = self.rank(node, local)
                self.app.append((at, f"{r}: {node}:{4100 + self.nodes.index(node)}:{4300 + local} [{local}] NCCL INFO ncclCommInitRank comm 0x55d9607ee240 rank {r} nranks {len(self.nodes) * GPUS} cudaDev {local} nvmlDev {local} busId {BUS_IDS[local]}000 commId 0x2b6c - Init COMPLETE"))

    def ip(self, node: str) -> str:
        return f"10.0.{self.nodes.index(node) + 1}.{10 + len(self.name) % 50}"

    def iteration(self, at: datetime, it: int) -> None:
        true, at = at, self.local(self.nodes[0], at)
        self.app.append((true, f"0: [rank0]:[I{at.month}{at.day:02d} {at:%H:%M:%S}.{at.microsecond:06d} train.py:212] iteration {it:8d}/  100000 | consumed samples: {it * 512} | elapsed time per iteration (ms): 1843.2 | lm loss: 2.3141E+00"))

    def glog(self, at: datetime, rank: int, level: str, src: str, text: str) -> None:
        true, at = at, self.local(self.node_of(rank), at)
        self.app.append((true, f"{rank}: [rank{rank}]:[{level}{at.month}{at.day:02d} {at:%H:%M:%S}.{at.microsecond:06d}123 {src}] {text}"))

    def nccl_warn(self, at: datetime, node: str, local: int, text: str, src: str = "transport/net_ib.cc:1696") -> None:
        pid = 4100 + self.nodes.index(node)
        true, at = at, self.local(node, at)
        self.app.append((true, f"{self.rank(node, local)}: [{at:%Y-%m-%d %H:%M:%S}] {node}:{pid}:{4400 + local} [{local}] {src} NCCL WARN {text}"))

    def plain(self, at: datetime, rank: int, text: str) -> None:
        self.app.append((at, f"{rank}: {text}"))

    def watchdog_cascade(self, at: datetime, ranks: list[int], seq: int = 4211, op: str = "ALLREDUCE", timeout_ms: int = 600000) -> None:
        for i, r in enumerate(ranks):
            # every rank enqueued the collective at once; each watchdog notices the timeout a little later and reports
            # its own elapsed time (so ts - ran_for is the same instant, as on a real cluster)
            t = at + timedelta(milliseconds=37 * i)
            self.glog(t, r, "E", "ProcessGroupNCCL.cpp:607", f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=466119168, NumelOut=466119168, Timeout(ms)={timeout_ms}) ran for {timeout_ms + 61 + 37 * i} milliseconds before timing out.")
            self.glog(t, r, "E", "ProcessGroupNCCL.cpp:1664", f"[PG 0 (default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + 1}, last completed NCCL work: {seq - 1}.")

    # kernel log lines --------------------------------------------------------------------------------------
    def kern(self, node: str, at: datetime, text: str) -> None:
        self.kernel.setdefault(node, []).append((at, text))

    def kernel_file(self, node: str) -> str:
        boot = self.start - timedelta(days=3, seconds=1234.5)
        lines = [(self.start - timedelta(minutes=30), "systemd[1]: Started Daily apt download activities."),
                 (self.start - timedelta(minutes=20), "kernel: mlx5_core 0000:5e:00.0: mlx5_pcie_event:299:(pid 268269): PCIe slot power capability was not advertised.")]
        lines += self.kernel.get(node, [])
        out = []
        for at, text in sorted(lines, key=lambda x: x[0]):
            at = self.local(node, at)
            text = text.removeprefix("kernel: ")
            if self.kernel_format == "dmesg_t":
                out.append(f"[{at:%a %b %d %H:%M:%S %Y}] {text}")
            elif self.kernel_format == "iso":
                out.append(f"kern  :warn  : {at:%Y-%m-%dT%H:%M:%S},{at.microsecond:06d}+00:00 {text}")
            elif self.kernel_format == "dmesg":
                out.append(f"[{(at - boot).total_seconds():12.6f}] {text}")
            else:
                out.append(f"{at:%b %d %H:%M:%S} {node} kernel: [{(at - boot).total_seconds():12.6f}] {text}")
        return "\n".join(out) + "\n"


def write_attempt(folder: Path, s: Scenario, *, workload: str, cluster: str, gpu_model: str, state: str, exit_code: str,
                  attempt: int = 0, metrics: str | None = None) -> Path:
    """Write one scenario as an attempt folder (application log, a kernel log per node, attempt.yaml, and the metrics
    CSV when given); return the spec."""
    (folder / "app").mkdir(parents=True, exist_ok=True)
    (folder / "kernel").mkdir(parents=True, exist_ok=True)
    app = "\n".join(line for _, line in sorted(s.app, key=lambda x: x[0])) + "\n"
    (folder / "app" / "train.log").write_text(app, encoding="utf-8")
    for node in s.nodes:
        (folder / "kernel" / f"{node}.log").write_text(s.kernel_file(node), encoding="utf-8")
    spec = {
        "workload_id": workload, "attempt": attempt, "cluster": cluster, "state": state, "exit_code": exit_code,
        "start": s.start.strftime("%Y-%m-%dT%H:%M:%SZ"), "end": s.end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timezone": "UTC", "gpu_model": gpu_model, "gpus_per_node": GPUS, "nodes": s.nodes,
        "logs": [{"source": "applog", "path": "app/*.log"}, {"source": "syslog", "path": "kernel/{node}.log"}],
    }
    if metrics is not None:
        (folder / "metrics").mkdir(exist_ok=True)
        (folder / "metrics" / "dcgm_ib.csv").write_text(metrics, encoding="utf-8")
        spec["metrics"] = ["metrics/dcgm_ib.csv"]
    (folder / "attempt.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return folder / "attempt.yaml"
