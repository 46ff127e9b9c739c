"""Multi-node attempts built from the catalogue's rendered lines (tests/rendered/*.yaml), scored beside the real-line
corpus by `firstfault evaluate --corpus`. Per catalogue file (an emitter family), one attempt per root class its
entries argue for: the first rendered example of the first root entry of that class on node-02, in the log of its
source, while node-01 and node-03 report only a collective left waiting (the rendered ProcessGroupNCCL timeout);
expected: that class, on the culprit the render test expects (none for a job-scoped cause). A family without a root
entry gets one attempt with its first rendered line, expected `unattributed`. Then `chains.yaml`: per causal chain of
CHAIN_CASES, the cause entry's line and then the effect entry's on node-02 (one file when they share a source, so
unstamped lines keep their order; a kernel line stamped as syslog writes it when the chain counts an unstamped effect
only after a stamped cause; for peers that name the lost node by its address, the effect on node-01 and node-03, each
reporting as itself, and node-02 known by that address) and the same waiting peers, expected the cause. Per recovery
chain of RECOVERY_CASES, a flap that recovered on node-02 with training progressing after it, then the peers time out:
expected `unattributed`. Each case names its chain (`chains:`), and tests/test_rendered_cases.py checks that the chain
made the effect its cause's symptom (or, for a recovery, a recovered near miss).

    python -m firstfault.rules_sql.rendered_cases tests/rendered     # writes one <family>.yaml per catalogue file
"""
from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from firstfault.landing import events_from_lines
from firstfault.rules_sql.catalogue import NODES, LINE_NODE, example_windows, expected_culprit
from firstfault.rules_sql.chains import load_chains
from firstfault.transforms.messages import Example, Message, load_catalogue

PEER_SYMPTOM = "pytorch.pg_nccl.blocking_wait_timeout"  # what the healthy peers print while the culprit is down
WAITING_NODES = tuple(n for n in NODES if n != LINE_NODE)
# causal chain (rules_sql/chains.yaml) -> (cause entry, effect entry[, the entry its `when` condition asks for]), all
# placed on node-02
CHAIN_CASES = {
    "gpu_lost.explains.pcie_aer": ("nvidia.gpu.fallen_off_bus_probe", "linux.aer.error_received_fatal"),
    "pcie_upstream.explains.gpu_lost": ("linux.aer.error_received_fatal", "nvidia.gpu.fallen_off_bus_probe", "linux.mlx5.health_compromised"),
    "pcie_aer.explains.nic": ("linux.aer.error_received_fatal", "efa.admin.no_completion"),
    "pcie_aer.explains.link_down": ("linux.aer.error_received_fatal", "linux.ib.port_link_down"),
    "nic.explains.link_down": ("linux.mlx5.fatal_sensor", "linux.ib.port_link_down"),
    "host_memory.explains.kernel": ("linux.edac.ue", "linux.softlockup.bug"),
    "filesystem.explains.kernel": ("linux.nvme.timeout_reset", "linux.hung_task.blocked"),
    "gpu_lost.explains.cuda_error": ("nvidia.gpu.fallen_off_bus_probe", "nvidia.xid.graphics_exception"),
    "gpu_memory.explains.cuda_error": ("nvidia.xid.uncontained", "nvidia.xid.graphics_exception"),
    "gpu_nvlink.explains.cuda_error": ("nvidia.xid.nvlink_fatal", "nvidia.xid.graphics_exception"),
    "gpu_firmware.explains.cuda_error": ("nvidia.xid.gsp_rpc_timeout", "nvidia.xid.graphics_exception"),
    "gpu_pcie.explains.cuda_error": ("linux.aer.error_received_fatal", "nvidia.xid.graphics_exception"),
    "gpu_power.explains.cuda_error": ("nvidia.xid.aux_power", "nvidia.xid.mig_gpu_instance"),
    "cuda_error.explains.xid_13_31": ("pytorch.c10_cuda.device_side_assert", "nvidia.xid.graphics_exception"),
    "host_oom.explains.exception": ("slurm.task_cgroup.oom_kill_events", "pytorch.dataloader.workers_exited_unexpectedly"),
    "host_oom.explains.node_failure": ("slurm.task_cgroup.oom_kill_events", "slurm.srun.node_failure"),
    "host_oom.explains.hung_task": ("linux.oom.killed_process", "linux.hung_task.blocked"),
    "nan.explains.exception": ("megatron.training.grad_norm_nan", "pytorch.clip_grad.non_finite_norm"),
    "filesystem.explains.exception": ("linux.nvme.timeout_reset", "linux.segfault.user_library"),
    "hardware.explains.node_failure": ("slurm.slurmstepd.uncorrectable_memory_error", "slurm.srun.node_failure"),
    "kernel.explains.node_failure": ("linux.hung_task.panic", "slurm.srun.node_failure"),
    "hardware.explains.lost_peer_ib": ("nvidia.gpu.fallen_off_bus_probe", "nccl.net_ib.completion_error"),
    "kernel.explains.lost_peer_ib": ("linux.hung_task.panic", "nccl.net_ib.completion_error"),
    "nic.explains.lost_peer_ib": ("efa.admin.no_completion", "nccl.net_ib.completion_error"),
    "host_oom.explains.lost_peer_ib": ("linux.oom.killed_process", "nccl.net_ib.completion_error"),
    "node_failure.explains.lost_peer_ib": ("slurm.slurmstepd.cancelled_node_failure", "nccl.net_ib.completion_error"),
    "scheduler_end.explains.later_errors": ("slurm.slurmstepd.cancelled_preemption", "pytorch.pg_nccl.watchdog_stuck"),
    "lost_node.explains.peers_stalled_watchdogs": ("nvidia.gpu.fallen_off_bus_probe", "pytorch.pg_nccl.watchdog_stuck"),
    "down_link.explains.peers_stalled_watchdogs": ("linux.ib.port_link_down", "pytorch.pg_nccl.watchdog_stuck"),
    "link_down.explains.lost_peer_socket": ("linux.ib.port_link_down", "nccl.socket.net_recv_failed"),
    "nic.explains.lost_peer_socket": ("linux.mlx5.health_compromised", "nccl.socket.net_recv_failed"),
    "crash.explains.lost_peer_socket": ("linux.segfault.user", "nccl.socket.net_recv_failed"),
    "application.explains.lost_peer_socket": ("deepspeed.engine.universal_checkpoint_missing", "nccl.socket.net_recv_failed"),
}
# recovery chain (`relation: recovered`) -> the entries of a flap on node-02, the recovery last, stamped RECOVERY_STAMPS
RECOVERY_CASES = {
    "link_up.recovers.link_down": ("linux.mlx5.link_down", "linux.mlx5.link_up"),
    "port_active.recovers.port_error": ("linux.mlx5.cable_unplugged", "linux.mlx5.cable_plugged", "linux.mlx5.link_up"),
}
# chain whose cause is a node gone silent -> the effect entry its peer prints, naming it (a single edge)
SILENT_CASES = {"went_silent.explains.reporting_peer": "nccl.net_ib.completion_error"}
RECOVERY_STAMPS = ("01:00:03", "01:00:05", "01:00:09")  # seconds apart, 40 minutes before the peers time out
PROGRESS = "megatron.training.iteration"  # its rendered lines: training progressing after the recovery, on every node
SYSLOG_PREFIX = "Nov 29 {time} {node} kernel: "
SYSLOG_TIME = "01:40:03"
CHAINS_FILE = "chains.yaml"
HEADER = ("# Rendered multi-node cases: GENERATED by `python -m firstfault.rules_sql.rendered_cases tests/rendered` from the\n"
          "# catalogue's rendered example lines (transforms/messages/{file}); edit the catalogue, then regenerate.\n")


def rendered_cases(messages: list[Message]) -> dict[str, dict]:
    """Catalogue file name -> its document of cases (the corpus format), files and cases in catalogue order."""
    symptom = first_rendered(next(m for m in messages if m.id == PEER_SYMPTOM))
    picks = _picks(messages)
    windows = example_windows([(m, 0, x) for m, x in picks])
    docs: dict[str, dict] = {}
    for (m, x), window in zip(picks, windows):
        doc = docs.setdefault(m.file, {"rule": f"rendered_{Path(m.file).stem}", "cases": []})
        doc["cases"].append(_case(m, x, window, symptom))
    docs[CHAINS_FILE] = {"rule": "rendered_chains", "cases": _chain_cases(messages, symptom) + _silent_cases(messages, symptom)
                                                            + _recovery_cases(messages, symptom)}
    return docs


def _chain_cases(messages: list[Message], symptom: Example) -> list[dict]:
    by_id = {m.id: m for m in messages}
    rows = {row["id"]: row for row in load_chains()[0]}
    cases = []
    for chain, (cause_id, effect_id, *condition_ids) in CHAIN_CASES.items():
        row, cause, effect = rows[chain], by_id[cause_id], by_id[effect_id]
        cause_x, effect_x = first_rendered(cause), first_rendered(effect)
        if row["unstamped"] == "after_stamped" and cause.source == "syslog":
            # the effect counts only after a stamped cause: the cause's line as syslog writes it, with its stamp
            cause_x = _stamped(cause_x, SYSLOG_TIME)
        placed, context = [((cause, cause_x), LINE_NODE)], {}
        if row["scope"] == "peer_address":  # every peer reports losing the cause's node by the address its line names
            placed += [((effect, replace(effect_x, lines=tuple(re.sub(rf"\b{LINE_NODE}\b", node, line) for line in effect_x.lines))), node)
                       for node in WAITING_NODES]
            context = {"addresses": {LINE_NODE: _peer_address(effect, effect_x)}}
        else:
            placed.append(((effect, effect_x), LINE_NODE))
        # unstamped lines of one file: the condition's hit counts after both the cause's and the effect's
        placed += [((by_id[c], first_rendered(by_id[c])), LINE_NODE) for c in condition_ids]
        logs = {f"applog/{n}": list(symptom.lines) for n in WAITING_NODES}
        for (m, x), node in placed:
            logs.setdefault(f"{m.source}/{node}", []).extend(x.lines)
        windows = [w for w in example_windows([(cause, 0, cause_x), (effect, 0, effect_x)]) if w]
        span = {"start": min(w["start"] for w in windows), "end": max(w["end"] for w in windows)} if windows else {}
        domain, subdomain = cause.cls.split("/")
        # a job-scoped cause has no culprit node, unless peers name the node they lost
        culprits = [] if cause.scope == "job" and row["scope"] != "peer_address" else [expected_culprit(cause, cause_x)]
        cases.append({"name": f"{chain}.rendered", "kind": "positive", "chains": [chain], "catalogue": [cause_id, effect_id, *condition_ids],
                      "context": {"nodes": list(NODES), "state": "FAILED", **context, **span}, "logs": logs,
                      "expect": {"verdict": "attributed", "domain": domain, "subdomain": subdomain, "culprit_nodes": culprits}})
    return cases


def _silent_cases(messages: list[Message], symptom: Example) -> list[dict]:
    """Per chain of SILENT_CASES: node-02 logs its first iteration line and then nothing, node-01 trains on and then
    prints the effect naming node-02 by its address, node-03 trains on and waits: the edge's end that went silent first
    is expected, with the class the effect's rule gives it."""
    by_id = {m.id: m for m in messages}
    rows = {row["id"]: row for row in load_chains()[0]}
    progress = by_id[PROGRESS]
    progress_lines = [line for x in progress.examples if x.url is None for line in x.lines]
    cases = []
    for chain, effect_id in SILENT_CASES.items():
        row, effect = rows[chain], by_id[effect_id]
        reporter, waiting = WAITING_NODES
        effect_x = first_rendered(effect)
        reported = [re.sub(rf"\b{LINE_NODE}\b", reporter, line) for line in effect_x.lines]
        logs = {f"applog/{LINE_NODE}": progress_lines[:1], f"applog/{reporter}": progress_lines + reported,
                f"applog/{waiting}": progress_lines + list(symptom.lines)}
        windows = [w for w in example_windows([(progress, 0, x) for x in progress.examples if x.url is None]) if w]
        cases.append({"name": f"{chain}.rendered", "kind": "positive", "chains": [chain], "catalogue": [PROGRESS, effect_id],
                      "context": {"nodes": list(NODES), "state": "FAILED", "addresses": {LINE_NODE: _peer_address(effect, effect_x)},
                                  "start": min(w["start"] for w in windows), "end": max(w["end"] for w in windows)},
                      "logs": logs, "expect": {"verdict": "attributed", "domain": row["effect_domain"],
                                               "subdomain": row["effect_subdomain"], "culprit_nodes": [LINE_NODE]}})
    return cases


def _recovery_cases(messages: list[Message], symptom: Example) -> list[dict]:
    """Per recovery chain: a flap on node-02 that recovered within seconds (syslog-stamped), training progressing on
    every node for half an hour after it, then the peers time out with no cause: the flap is no cause, the attempt
    stays unattributed."""
    by_id = {m.id: m for m in messages}
    progress = by_id[PROGRESS]
    progress_xs = [x for x in progress.examples if x.url is None]
    cases = []
    for chain, entry_ids in RECOVERY_CASES.items():
        flap = [(by_id[i], _stamped(first_rendered(by_id[i]), stamp)) for i, stamp in zip(entry_ids, RECOVERY_STAMPS)]
        logs = {f"syslog/{LINE_NODE}": [line for _, x in flap for line in x.lines]}
        for node in NODES:
            logs[f"applog/{node}"] = [line for x in progress_xs for line in x.lines] + (list(symptom.lines) if node != LINE_NODE else [])
        windows = [w for w in example_windows([(m, 0, x) for m, x in flap] + [(progress, 0, x) for x in progress_xs]) if w]
        cases.append({"name": f"{chain}.rendered", "kind": "positive", "chains": [chain], "catalogue": [*entry_ids, PROGRESS],
                      "context": {"nodes": list(NODES), "state": "FAILED",
                                  "start": min(w["start"] for w in windows), "end": max(w["end"] for w in windows)},
                      "logs": logs, "expect": {"verdict": "unattributed"}})
    return cases


def _stamped(x: Example, time: str) -> Example:
    """A kernel line as syslog writes it on node-02, with its stamp."""
    return replace(x, lines=tuple(SYSLOG_PREFIX.format(time=time, node=LINE_NODE) + line for line in x.lines))


def _peer_address(m: Message, x: Example) -> str:
    """The address a peer's line names the lost node by."""
    return events_from_lines(list(x.lines), m.source, node=WAITING_NODES[0]).drop_nulls("peer_addr")["peer_addr"][0]



def _picks(messages: list[Message]) -> list[tuple[Message, Example]]:
    """Per file, the first rendered example of the first root entry of each class, or of its first entry when the
    file has no root entry."""
    picks, seen = [], set()
    files = list(dict.fromkeys(m.file for m in messages))
    for file in files:
        rendered = [(m, first_rendered(m)) for m in messages if m.file == file and first_rendered(m)]
        roots = [(m, x) for m, x in rendered if m.role == "root"]
        for m, x in roots or rendered[:1]:
            if (file, m.cls) not in seen:
                seen.add((file, m.cls))
                picks.append((m, x))
    return picks


def first_rendered(m: Message) -> Example | None:
    return next((x for x in m.examples if x.url is None), None)


def _case(m: Message, x: Example, window: dict, symptom: Example) -> dict:
    logs = {f"{m.source}/{LINE_NODE}": list(x.lines), **{f"applog/{n}": list(symptom.lines) for n in WAITING_NODES}}
    if m.role == "root":
        domain, subdomain = m.cls.split("/")
        culprits = [] if m.scope == "job" else [expected_culprit(m, x)]
        expect = {"verdict": "attributed", "domain": domain, "subdomain": subdomain, "culprit_nodes": culprits}
    else:
        expect = {"verdict": "unattributed"}
    return {"name": f"{m.id}.rendered", "kind": "positive", "catalogue": m.id,
            "context": {"nodes": list(NODES), "state": "FAILED", **window}, "logs": logs, "expect": expect}


def write_rendered_cases(folder: Path, messages: list[Message]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for file, doc in rendered_cases(messages).items():
        path = folder / file
        path.write_text(HEADER.format(file=file if file != CHAINS_FILE else "*.yaml, CHAIN_CASES") + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10_000),
                        encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_rendered_cases(Path(sys.argv[1]), load_catalogue()):
        print(path)
