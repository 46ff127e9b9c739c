"""Properties of the judgement (hypothesis): an attempt built by the simulator's writers around one injected fault keeps
its verdict when a symptom the fault explains is added, when benign lines are added, when its nodes are renamed or
listed in another order, and when an earlier fault the job visibly survived is added; an earlier independent fatal
fault takes the verdict over. Each example attributes the attempt and its variant in one rule pass."""
from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstfault.rules_sql.cases import Case, attribute_cases
from firstfault.synthetic.logwriters import Scenario
from firstfault.synthetic.matrix import cable_flap
from firstfault.synthetic.simulate import KERNEL_CHATTER, T0, _build, _gpu_xid, _noise, _peers_fail_towards, silence

FAULTS = ("gpu_lost", "gpu_memory", "gpu_nvlink", "ib_link", "nic", "nccl_segfault", "host_oom", "filesystem", "kernel_panic", "exception")
VERDICT = ("verdict", "domain", "subdomain", "culprit_nodes")
EXAMPLES = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@st.composite
def attempts(draw):
    return {"fault": draw(st.sampled_from(FAULTS)), "nodes": draw(st.integers(2, 6)), "seed": draw(st.integers(0, 10**6)),
            "kernel_format": draw(st.sampled_from(("syslog", "dmesg_t", "iso")))}


def _scenario(spec: dict, names: list[str] | None = None) -> tuple[Scenario, random.Random, str, object]:
    """The attempt of `spec` up to its fault: (scenario, its random stream, the culprit, when the fault began)."""
    rng = random.Random(spec["seed"])
    nodes = names or [f"gpu-{k:04d}" for k in range(1, spec["nodes"] + 1)]
    s = Scenario("prop", nodes, T0, T0 + timedelta(hours=2), "FAILED", "1:0", kernel_format=spec["kernel_format"])
    s.silent_after = {}
    culprit = nodes[rng.randrange(len(nodes))]
    _build(spec["fault"], s, rng, "H100", culprit, None)
    at = min([t for t, _ in s.app] + [t for lines in s.kernel.values() for t, _ in lines])
    return s, rng, culprit, at


def _finish(s: Scenario, rng: random.Random, at, name: str, node_order: list[str] | None = None) -> Case:
    _noise(s, rng, 40, trains_to_end=False, progress_until=at)
    silence(s)
    logs = {"applog": [line for _, line in sorted(s.app, key=lambda x: x[0])]}
    logs |= {f"syslog/{node}": s.kernel_file(node).splitlines() for node in s.nodes}
    context = {"start": f"{s.start:%Y-%m-%dT%H:%M:%SZ}", "end": f"{s.end:%Y-%m-%dT%H:%M:%SZ}", "state": "FAILED",
               "exit_code": "1:0", "gpu_model": "H100", "nodes": node_order or list(s.nodes)}
    return Case("judgement_properties", name, "positive", context, logs, {}, Path(__file__))


def _verdicts(*cases: Case) -> list[dict]:
    out = attribute_cases(list(cases))
    return [{k: sorted(v) if k == "culprit_nodes" else v for k, v in out[c.id][0].items() if k in VERDICT} for c in cases]


def _base(spec: dict) -> Case:
    s, rng, _, at = _scenario(spec)
    return _finish(s, rng, at, "base")


@EXAMPLES
@given(attempts(), st.integers(1, 5))
def test_a_symptom_the_fault_explains_never_changes_the_verdict(spec, reporters):
    s, rng, culprit, at = _scenario(spec)
    peers = [n for n in s.nodes if n != culprit][:reporters]
    _peers_fail_towards(s, random.Random(spec["seed"] + 1), culprit, at + timedelta(seconds=4), peers)
    base, more = _verdicts(_base(spec), _finish(s, rng, at, "more"))
    assert more == base


@EXAMPLES
@given(attempts(), st.integers(5, 60))
def test_benign_lines_never_change_the_verdict(spec, count):
    s, rng, _, at = _scenario(spec)
    noise = random.Random(count)
    for _ in range(count):
        node = noise.choice(s.nodes)
        text = noise.choice(KERNEL_CHATTER).format(n=noise.randrange(10**6), ms=noise.randrange(1000), pid=noise.randrange(10**6),
                                                   k=noise.randrange(2, 40), h=noise.getrandbits(28), port=noise.randrange(32768, 61000))
        s.kern(node, s.start + timedelta(seconds=noise.uniform(60, (at - s.start).total_seconds() + 600)), text)
    base, noisy = _verdicts(_base(spec), _finish(s, rng, at, "noisy"))
    assert noisy == base


@EXAMPLES
@given(attempts(), st.randoms(use_true_random=False))
def test_renamed_and_reordered_nodes_never_change_the_verdict(spec, shuffle):
    names = [f"h{shuffle.randrange(10**6):06d}x{k}" for k in range(spec["nodes"])]
    renamed = dict(zip([f"gpu-{k:04d}" for k in range(1, spec["nodes"] + 1)], names))
    s, rng, _, at = _scenario(spec, names)
    order = list(names)
    shuffle.shuffle(order)
    base, other = _verdicts(_base(spec), _finish(s, rng, at, "renamed", order))
    assert other == {**base, "culprit_nodes": sorted(renamed[n] for n in base["culprit_nodes"])}


@EXAMPLES
@given(attempts(), st.integers(5, 40))
def test_a_fault_the_job_survived_never_changes_the_verdict(spec, minutes):
    s, rng, culprit, at = _scenario(spec)
    other = next(n for n in s.nodes if n != culprit)
    cable_flap(s, other, at - timedelta(minutes=minutes))
    base, survived = _verdicts(_base(spec), _finish(s, rng, at, "survived"))
    assert survived == base


@EXAMPLES
@given(attempts(), st.integers(5, 40))
def test_an_earlier_independent_fatal_fault_becomes_the_root(spec, minutes):
    s, rng, culprit, at = _scenario(spec)
    first = next(n for n in s.nodes if n != culprit)
    earlier = at - timedelta(minutes=minutes)
    _gpu_xid(s, random.Random(spec["seed"] + 2), [], "gpu_lost", first, 3, earlier, "H100")
    (got,) = _verdicts(_finish(s, rng, earlier, "earlier"))
    assert got == {"verdict": "attributed", "domain": "hardware", "subdomain": "gpu_lost", "culprit_nodes": [first]}
