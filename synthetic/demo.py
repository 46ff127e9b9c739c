"""The embedded demo: attempts with known failures written in the line formats real clusters print.

Every attempt gets a static context (`attempts/<name>/attempt.yaml`), an application log as `srun --label` prints
it, and a kernel log per node in one of the kernel formats (syslog without a year, `dmesg -T`, ISO dmesg). The
expected verdict of each attempt is in EXPECTED; tests hold the demo to it.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from firstfault.connectors.static_context import load_static_context
from firstfault.synthetic.logwriters import Scenario, write_attempt
from firstfault.synthetic.simulate import simulate

from firstfault.config import DEMO_CONFIG_HEADER, load_config
from firstfault.nightly import run_nightly

T0 = datetime(2026, 11, 29, 1, 0, 0, tzinfo=timezone.utc)

# attempt name -> (verdict, domain, subdomain, culprit nodes)
EXPECTED = {
    "headline": ("attributed", "hardware", "gpu_nvlink", ["node-02"]),
    "lost-gpu": ("attributed", "hardware", "gpu_lost", ["gpu-b2"]),
    "ib-link-down": ("attributed", "network", "ib_link", ["ib-03"]),
    "cuda-oom": ("attributed", "application", "cuda_oom", ["trn-02"]),
    "time-limit": ("attributed", "infrastructure", "time_limit", []),
    "python-exception": ("attributed", "application", "exception", ["app-01"]),
    "success": ("not_failed", None, None, []),
    "ambiguous": ("ambiguous", "hardware", "ambiguous", ["amb-01", "amb-02"]),
    "unattributed": ("unattributed", None, None, []),
}


def _headline() -> Scenario:
    s = Scenario("headline", ["node-01", "node-02", "node-03"], T0, T0 + timedelta(hours=1, minutes=22, seconds=45), "FAILED", "1:0")
    s.nccl_init(T0 + timedelta(seconds=40))
    for k in range(1, 6):
        s.iteration(T0 + timedelta(minutes=12 * k), 100 * k)
    xid_at = T0 + timedelta(hours=1, minutes=10, seconds=3, milliseconds=120)
    s.kern("node-02", xid_at, "NVRM: Xid (PCI:0000:3b:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 04 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
    s.kern("node-02", xid_at + timedelta(milliseconds=4), "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    s.kern("node-02", xid_at + timedelta(seconds=2), "NVRM: Xid (PCI:0000:3b:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149")
    t = xid_at + timedelta(seconds=3)
    s.nccl_warn(t, "node-02", 3, "Cuda failure 'an uncorrectable NVLink error was detected during the execution'", "enqueue.cc:1512")
    s.nccl_warn(t + timedelta(seconds=1), "node-01", 3, f"NET/IB : Got completion from peer {s.ip('node-02')}<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{s.ip('node-01')} remoteGids::ffff:{s.ip('node-02')}")
    s.nccl_warn(t + timedelta(seconds=1, milliseconds=300), "node-03", 5, f"NET/IB : Got completion from peer {s.ip('node-02')}<41123> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:{s.ip('node-03')} remoteGids::ffff:{s.ip('node-02')}")
    for r, node in ((3, "node-01"), (21, "node-03")):
        s.plain(t + timedelta(seconds=2), r, f"[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error, NCCL version 2.21.5")
        s.plain(t + timedelta(seconds=2), r, f"[rank{r}]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.")
    s.watchdog_cascade(xid_at + timedelta(minutes=10, seconds=1), [0, 1, 8, 16, 17])
    return s


def _lost_gpu() -> Scenario:
    s = Scenario("lost-gpu", ["gpu-b1", "gpu-b2"], T0 + timedelta(hours=2), T0 + timedelta(hours=2, minutes=41), "FAILED", "1:0", kernel_format="dmesg_t")
    s.nccl_init(s.start + timedelta(seconds=30))
    at = s.start + timedelta(minutes=37, seconds=12)
    s.kern("gpu-b2", at - timedelta(seconds=1), "NVRM: GPU at PCI:0000:9a:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b")
    s.kern("gpu-b2", at, "NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    s.kern("gpu-b2", at, "NVRM: GPU 0000:9a:00.0: GPU has fallen off the bus.")
    s.plain(at + timedelta(seconds=2), 12, "[rank12]: RuntimeError: CUDA error: unspecified launch failure")
    s.plain(at + timedelta(seconds=2), 12, "[rank12]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.")
    s.nccl_warn(at + timedelta(seconds=3), "gpu-b1", 2, f"Net : Call to recv from {s.ip('gpu-b2')}<58355> failed : Connection reset by peer", "misc/socket.cc:518")
    s.watchdog_cascade(at + timedelta(minutes=1), [0, 1, 2])
    return s


def _ib_link_down() -> Scenario:
    s = Scenario("ib-link-down", ["ib-01", "ib-02", "ib-03", "ib-04"], T0 + timedelta(hours=3), T0 + timedelta(hours=3, minutes=52), "FAILED", "1:0")
    s.nccl_init(s.start + timedelta(seconds=50))
    at = s.start + timedelta(minutes=44, seconds=2)
    s.kern("ib-03", at, "mlx5_core 0000:5e:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 0, Cable error, Bad or shorted cable/module")
    s.kern("ib-03", at + timedelta(milliseconds=30), "systemd-networkd[1021]: ib0: Lost carrier")
    for i, node in enumerate(("ib-01", "ib-02", "ib-04")):
        s.nccl_warn(at + timedelta(seconds=8 + i), node, 1, f"NET/IB : Got completion from peer {s.ip('ib-03')}<{44206 + i}> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid ::ffff:{s.ip(node)} remoteGids::ffff:{s.ip('ib-03')}")
        s.nccl_warn(at + timedelta(seconds=9 + i), node, 1, f"NET/IB : Got completion from peer {s.ip('ib-03')}<{44206 + i}> with status=5 opcode=32656 len=32659 vendor err 249 (Recv) localGid ::ffff:{s.ip(node)} remoteGids::ffff:{s.ip('ib-03')}")
    s.watchdog_cascade(at + timedelta(minutes=6), [0, 8, 16, 24])
    return s


def _cuda_oom() -> Scenario:
    s = Scenario("cuda-oom", ["trn-01", "trn-02"], T0 + timedelta(hours=4), T0 + timedelta(hours=4, minutes=20), "FAILED", "1:0", kernel_format="iso")
    s.nccl_init(s.start + timedelta(seconds=20))
    s.iteration(s.start + timedelta(minutes=5), 50)
    at = s.start + timedelta(minutes=8, seconds=31)
    r = 13
    for text in ("Traceback (most recent call last):", '  File "/workspace/train.py", line 412, in <module>', "    loss = model(batch).loss",
                 '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1751, in _call_impl',
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 5 has a total capacity of 79.15 GiB of which 12.73 GiB is free. Including non-PyTorch memory, this process has 66.40 GiB memory in use."):
        s.plain(at, r, f"[rank{r}]: {text}")
    s.watchdog_cascade(at + timedelta(minutes=10), [0, 1, 2, 3, 8, 9])
    return s


def _time_limit() -> Scenario:
    s = Scenario("time-limit", ["tl-01", "tl-02"], T0 + timedelta(hours=5), T0 + timedelta(hours=9), "TIMEOUT", "0:15")
    s.nccl_init(s.start + timedelta(seconds=20))
    for k in range(1, 8):
        s.iteration(s.start + timedelta(minutes=30 * k), 1000 * k)
    s.plain(s.end - timedelta(seconds=1), 0, f"slurmstepd: error: *** JOB 867816 ON tl-01 CANCELLED AT {s.end:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***")
    s.plain(s.end, 0, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
    return s


def _python_exception() -> Scenario:
    s = Scenario("python-exception", ["app-01", "app-02"], T0 + timedelta(hours=6), T0 + timedelta(hours=6, minutes=3), "FAILED", "1:0")
    s.nccl_init(s.start + timedelta(seconds=20))
    s.iteration(s.start + timedelta(minutes=1), 10)
    at = s.start + timedelta(minutes=2, seconds=10)
    for text in ("Traceback (most recent call last):", '  File "/workspace/data.py", line 88, in __getitem__',
                 "    sample = json.loads(line)", "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", "",
                 "The above exception was the direct cause of the following exception:", "",
                 "Traceback (most recent call last):", '  File "/workspace/train.py", line 301, in <module>',
                 "ValueError: corrupt shard /data/shard-00042.jsonl"):
        s.plain(at, 3, f"[rank3]: {text}" if text else "[rank3]:")
    s.plain(at + timedelta(seconds=1), 3, "srun: error: app-01: task 3: Exited with exit code 1")
    s.plain(at + timedelta(seconds=2), 0, "srun: error: app-01: tasks 0-2,4-7: Terminated")
    return s


def _success() -> Scenario:
    s = Scenario("success", ["ok-01", "ok-02"], T0 + timedelta(hours=7), T0 + timedelta(hours=8), "COMPLETED", "0:0", kernel_format="dmesg_t")
    s.nccl_init(s.start + timedelta(seconds=20))
    for k in range(1, 6):
        s.iteration(s.start + timedelta(minutes=10 * k), 500 * k)
    s.kern("ok-02", s.start + timedelta(minutes=17), "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0")
    s.kern("ok-02", s.start + timedelta(minutes=17), "pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)")
    return s


def _ambiguous() -> Scenario:
    s = Scenario("ambiguous", ["amb-01", "amb-02"], T0 + timedelta(hours=10), T0 + timedelta(hours=10, minutes=30), "FAILED", "1:0")
    s.nccl_init(s.start + timedelta(seconds=20))
    at = s.start + timedelta(minutes=21, seconds=5)
    s.kern("amb-01", at, "NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    s.kern("amb-02", at + timedelta(milliseconds=700), "NVRM: Xid (PCI:0000:ab:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fdf0de80 partition 5, subpartition 1")
    s.watchdog_cascade(at + timedelta(minutes=3), [0, 3, 9, 12])
    return s


def _unattributed() -> Scenario:
    s = Scenario("unattributed", ["un-01", "un-02", "un-03"], T0 + timedelta(hours=11), T0 + timedelta(hours=11, minutes=45), "FAILED", "6:0")
    s.nccl_init(s.start + timedelta(seconds=20))
    s.iteration(s.start + timedelta(minutes=12), 300)
    s.watchdog_cascade(s.start + timedelta(minutes=40), [0, 5, 9, 13, 17, 22], seq=9120)
    s.plain(s.end - timedelta(seconds=5), 0, "terminate called after throwing an instance of 'c10::DistBackendError'")
    return s


SCENARIOS = (_headline, _lost_gpu, _ib_link_down, _cuda_oom, _time_limit, _python_exception, _success, _ambiguous, _unattributed)


def write_demo(root: str | Path) -> list[Path]:
    """Write every scenario under root/attempts/<name>/ and return the attempt.yaml paths."""
    root = Path(root)
    specs = []
    for build in SCENARIOS:
        s = build()
        folder = root / "attempts" / s.name
        specs.append(write_attempt(folder, s, workload=f"demo-{s.name}", cluster="demo", gpu_model="H100",
                                   state=s.state, exit_code=s.exit_code))
    return specs


def run_demo(directory: str, fleet: int = 0) -> tuple[str, list[str]]:
    """Write the scenarios (and, with `fleet`, a small simulated fleet under DIR/fleet, synthetic/simulate.py) and
    attribute everything through the nightly run, one night per day on which attempts ended. Returns the warehouse
    and the scenarios' attempt ids."""
    root = Path(directory).resolve()
    specs = write_demo(root)
    if fleet:
        simulate(root / "fleet", nodes=24, attempts=fleet, days=1, seed=0, lines=(80, 200))
    config = load_config(str(write_demo_config(root)))
    every = sorted(root.glob("**/attempt.yaml"))
    nights = sorted({load_static_context(str(p)).end.date() for p in every})
    for night in nights:
        run_nightly(config, night, flow="demo")
    return config.warehouse.path, [load_static_context(str(p)).attempt_id for p in specs]


def write_demo_config(root: Path) -> Path:
    """root/firstfault.toml naming the demo's lake, warehouse and catalog: `--config` with it points any command
    (sql, report, nightly, api) at the demo. The demo itself runs with it."""
    path = root / "firstfault.toml"
    path.write_text(
        f"{DEMO_CONFIG_HEADER}: the demo's lake, warehouse and catalog (docs/configuration.md)\n"
        f"[lake]\nroot = {json.dumps(str(root / 'lake'))}\n\n"
        f"[warehouse]\npath = {json.dumps(str(root / 'firstfault.duckdb'))}\n\n"
        "[catalog]\npaths = [\"**/attempt.yaml\"]  # relative to this file: the scenarios and the simulated fleet\n",
        encoding="utf-8")
    return path
