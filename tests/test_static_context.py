from datetime import datetime, timezone

import pytest

from firstfault.connectors.static_context import context_from_dict, load_static_context
from firstfault.errors import BadInput
from firstfault.ids import attempt_id_from_key, attempt_key

BASE = {"workload_id": "w", "start": "2026-11-29T01:00:00Z", "nodes": ["n1", "n2"]}


def ctx(**changes):
    doc = {**BASE, **changes}
    return context_from_dict({k: v for k, v in doc.items() if v is not None}, "attempt.yaml", ".")


def test_defaults_and_identity():
    c = ctx()
    assert c.attempt_id == "default/w/0"
    assert c.day == "2026-11-29"
    assert c.rank_map()[9] == (9, "n2", 1)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"nodes": None}, "nodes"),
        ({"nodes": []}, "nodes"),
        ({"nodes": ["a", "a"]}, "nodes"),
        ({"workload_id": None}, "workload_id"),
        ({"start": "yesterday"}, "start"),
        ({"end": "2026-11-28T00:00:00Z"}, "end"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"gpus_per_node": 0}, "gpus_per_node"),
        ({"logs": [{"source": "applog"}]}, "logs[0].path"),
        ({"logs": [{"path": "x", "label": "task"}]}, "logs[0].label"),
        ({"ranks": [{"rank": 0, "node": "zz"}]}, "ranks[0].node"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_malformed_spec_names_the_field(changes, field):
    with pytest.raises(BadInput) as err:
        ctx(**changes)
    assert err.value.field == field and err.value.file == "attempt.yaml"


def test_zone_less_start_uses_the_attempt_zone():
    c = ctx(start="2026-07-01T12:00:00", timezone="Europe/Berlin")
    assert c.start == datetime(2026, 7, 1, 10, 0, tzinfo=timezone.utc)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(BadInput, match="file not found"):
        load_static_context(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [a\n")
    with pytest.raises(BadInput, match="not valid YAML"):
        load_static_context(str(bad))


@pytest.mark.parametrize("aid", ["demo/llama-70b/0", "slurm/123_7/1", "slurm/123+0/0", "k8s/ns~x/wl/2", "c/ünï/0007"])
def test_attempt_key_is_path_safe_and_reversible(aid):
    key = attempt_key(aid)
    assert all(ch.isalnum() or ch in "._-~" for ch in key)
    assert not key.isdigit()
    assert attempt_id_from_key(key) == aid
