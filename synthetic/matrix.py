"""Combinatorial attempts for measuring the judgement (tests/test_judgement_matrix.py, benchmarks of accuracy).

Every fault the simulator injects (simulate.FAULTS) and every root class of the message catalogue is crossed with how
the failure shows and how it is recorded: the extra symptoms the peers print and how many of them witness the culprit,
the kernel log's stamps (three wall-clock formats and raw `dmesg`, seconds since boot only), the culprit node's clock,
the job's size, and an earlier fault the job visibly survived (a cable unplugged and plugged back seconds later, with
training progressing after it). A pairwise covering array keeps the set small: every pair of values of any two
dimensions meets in at least one attempt, so a defect that needs two conditions at once shows. The truth of an attempt
is the fault injected, never the rules; the folder has simulate's layout (catalog/, truth.jsonl), so
`simulate.attribute_fleet` and `simulate.evaluate` (or `firstfault evaluate`) score it.
"""
from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from firstfault.rules_sql.rendered_cases import first_rendered
from firstfault.synthetic.logwriters import Scenario, write_attempt
from firstfault.synthetic.simulate import (
    CLUSTER, FAULTS, GPU_MODELS, GPUS, T0, TRAINS_UNTIL_THE_END, _build, _noise, _peers_fail_towards, _socket_resets, catalogue_roots,
    line_times, place_catalogue_root, silence,
)
from firstfault.transforms.messages import Example, Message, load_catalogue

#: faults without a culprit node: nobody for the peers to name
JOB_LEVEL = {"success", "time_limit", "cancelled", "preemption", "watchdog_unknown", "nan"}
#: the catalogue's entries a survived cable flap writes on another node than the culprit, seconds apart
FLAP = ("linux.mlx5.cable_unplugged", "linux.mlx5.cable_plugged", "linux.mlx5.link_up")
DIMENSIONS: dict[str, tuple] = {
    "nodes": (2, 16, 128),
    "kernel_format": ("syslog", "dmesg_t", "iso", "dmesg"),
    "culprit_clock_s": (0.0, 25.0, -25.0),
    "symptoms": ("cascade", "peer_completion", "socket_resets", "watchdogs"),
    "witnesses": ("all", "most", "few"),
    "survived": ("nothing", "cable_flap"),
}
LARGEST = 128  # catalogue kinds are crossed with the smaller jobs only: their rows are many, their lines one


@functools.cache
def catalogue_kinds() -> dict[str, tuple[Message, Example]]:
    """`catalogue:<entry id>` -> (entry, its rendered one-line example): the first root entry of each class."""
    kinds, seen = {}, set()
    for family in sorted(catalogue_roots()):
        for m, x in catalogue_roots()[family]:
            if m.cls not in seen:
                seen.add(m.cls)
                kinds[f"catalogue:{m.id}"] = (m, x)
    return kinds


def kinds() -> list[str]:
    return [k for k in FAULTS if k != "catalogue"] + list(catalogue_kinds())


def allowed(row: dict) -> bool:
    """Whether a (partial) row can be written: extra symptoms need one culprit node to name (two same-second faults
    named by peers are no longer ambiguous), and the largest jobs are for the simulator's own faults."""
    kind = row.get("kind")
    if kind is None:
        return True
    if row.get("symptoms", "cascade") != "cascade" and (kind in JOB_LEVEL or kind == "ambiguous" or _job_scoped(kind)):
        return False
    return not (kind.startswith("catalogue:") and row.get("nodes") == LARGEST)


def _job_scoped(kind: str) -> bool:
    return kind.startswith("catalogue:") and catalogue_kinds()[kind][0].scope == "job"


def pairwise(dimensions: dict[str, tuple], allowed: Callable[[dict], bool]) -> list[dict]:
    """A covering array: rows such that every allowed pair of values of two dimensions is in some row. Greedy and
    deterministic: each row starts from the first uncovered pair and takes, dimension by dimension, the value that
    covers the most pairs still uncovered (the first such value on a tie)."""
    names = list(dimensions)
    uncovered = {(a, va, b, vb) for i, a in enumerate(names) for b in names[i + 1:]
                 for va in dimensions[a] for vb in dimensions[b] if allowed({a: va, b: vb})}
    order = {(name, v): (i, j) for i, name in enumerate(names) for j, v in enumerate(dimensions[name])}
    rows = []
    while uncovered:
        a, va, b, vb = min(uncovered, key=lambda p: (order[p[0], p[1]], order[p[2], p[3]]))
        row = {a: va, b: vb}
        for name in names:
            if name in row:
                continue
            gains = [(sum(_pair(names, name, v, k, row[k]) in uncovered for k in row), -j, v)
                     for j, v in enumerate(dimensions[name]) if allowed({**row, name: v})]
            row[name] = max(gains)[2]
        rows.append({name: row[name] for name in names})
        uncovered -= {(x, row[x], y, row[y]) for i, x in enumerate(names) for y in names[i + 1:]}
    return rows


def _pair(names: list[str], a: str, va, b: str, vb) -> tuple:
    """The pair of two dimensions' values, the dimension listed first first (as `uncovered` holds it)."""
    return (a, va, b, vb) if names.index(a) < names.index(b) else (b, vb, a, va)


def matrix_rows() -> list[dict]:
    return pairwise({"kind": tuple(kinds()), **DIMENSIONS}, allowed)


def write_matrix(out: str | Path, seed: int = 0) -> Path:
    """Write every row of the covering array as an attempt under `out` (simulate's layout); return truth.jsonl's path."""
    out = Path(out)
    (out / "catalog").mkdir(parents=True, exist_ok=True)
    truth = [_write_case(out, i, row, random.Random(f"matrix-{seed}-{i}")) for i, row in enumerate(matrix_rows())]
    path = out / "truth.jsonl"
    path.write_text("".join(json.dumps(t, sort_keys=True) + "\n" for t in truth), encoding="utf-8")
    return path


def _write_case(out: Path, i: int, row: dict, rng: random.Random) -> dict:
    kind = row["kind"]
    nodes = [f"gpu-{k:04d}" for k in range(1, row["nodes"] + 1)]
    culprit = nodes[rng.randrange(len(nodes))]
    second = rng.choice([n for n in nodes if n != culprit])
    gpu_model = GPU_MODELS[i % len(GPU_MODELS)][0]
    start = T0 + timedelta(hours=3 * i)
    s = Scenario(f"matrix-{i:04d}", nodes, start, start + timedelta(hours=2), "FAILED", "1:0", kernel_format=row["kernel_format"])
    s.skew = {culprit: row["culprit_clock_s"]}
    s.silent_after = {}
    if row["survived"] == "cable_flap":
        cable_flap(s, second, start + timedelta(minutes=10))
    before = line_times(s)
    if kind.startswith("catalogue:"):
        m, x = catalogue_kinds()[kind]
        culprits, _, over = place_catalogue_root(s, rng, m, x, culprit, start + timedelta(minutes=70), rng.randrange(500, 90000))
    else:
        culprits, _, over = _build(kind, s, rng, gpu_model, culprit, second if kind == "ambiguous" else None)
    fault_at = min(line_times(s) - before, default=None)
    if row["symptoms"] != "cascade" and fault_at is not None:
        reporters = _witnesses([n for n in nodes if n != culprit], row["witnesses"])
        PEER_SYMPTOMS[row["symptoms"]](s, rng, culprit, fault_at + timedelta(seconds=3), reporters)
    _noise(s, rng, 40, trains_to_end=kind == "time_limit", progress_until=None if kind in TRAINS_UNTIL_THE_END else fault_at)
    silence(s)
    if kind == "success":
        over = {"state": "COMPLETED", "exit_code": "0:0"}
    folder = out / "catalog" / f"{start:%Y-%m-%d}" / s.name
    write_attempt(folder, s, workload=s.name, cluster=CLUSTER, gpu_model=gpu_model,
                  state=over.get("state", s.state), exit_code=over.get("exit_code", s.exit_code))
    _, verdict, domain, subdomain, attributable = FAULTS["catalogue" if kind.startswith("catalogue:") else kind]
    domain, subdomain = over.get("class", (domain, subdomain))
    return {"attempt_id": f"{CLUSTER}/{s.name}/0", "spec": str(folder.relative_to(out) / "attempt.yaml"), "kind": kind,
            "verdict": verdict, "domain": domain, "subdomain": subdomain, "culprit_nodes": culprits,
            "attributable": attributable, "case": row}


def _peers_stall(s: Scenario, rng: random.Random, culprit: str, at: datetime, reporters: list[str]) -> None:
    """The reporters' ranks left waiting in the collective the culprit never joined: their NCCL watchdogs time out
    (Timeout(ms)=600000) ten minutes later; they name nobody."""
    s.watchdog_cascade(at + timedelta(minutes=10), [s.rank(n, k) for n in reporters for k in range(GPUS)], seq=rng.randrange(1000, 9000))


#: the extra symptom family the peers print -> its writer (culprit, onset, reporting peers)
PEER_SYMPTOMS = {"peer_completion": _peers_fail_towards, "socket_resets": _socket_resets, "watchdogs": _peers_stall}


def _witnesses(peers: list[str], share: str) -> list[str]:
    """The peers that report losing the culprit: every one, three in four, or one."""
    count = {"all": len(peers), "most": max(1, (3 * len(peers) + 3) // 4), "few": 1}[share]
    return peers[:count]


def cable_flap(s: Scenario, node: str, at: datetime) -> None:
    """A cable unplugged and plugged back on `node` seconds apart, long before the failure: the job trains on."""
    by_id = {m.id: m for m in load_catalogue()}
    for k, entry in enumerate(FLAP):
        for line in first_rendered(by_id[entry]).lines:
            s.kern(node, at + timedelta(seconds=3 * k), line)

