"""Bad input gives exit status 2 and one line naming the file and the field (API: 400), never an internal error;
values of the wrong type are refused, not silently converted; attempt ids that cannot be read back are refused."""
import json
import pickle
from datetime import datetime, timezone

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstfault.cli import main
from firstfault.config import resolve_config
from firstfault.connectors.static_context import KNOWN_KEYS, context_from_dict
from firstfault.errors import BadInput
from firstfault.ids import attempt_id
from test_api import Server, with_api

BASE = {"workload_id": "w", "start": "2026-11-29T01:00:00Z", "nodes": ["node-01"], "logs": [{"path": "app.log"}]}

CASES = [
    ({"attempt": 10**30}, "attempt"),
    ({"ranks": [{"rank": 0, "node": ["x"]}]}, "ranks[0].node"),
    ({"ranks": [{"rank": 10**30, "node": "node-01"}]}, "ranks[0].rank"),
    ({"ranks": [{"rank": 0, "node": "node-01", "local_rank": "x"}]}, "ranks[0].local_rank"),
    ({"start": "0001-01-01T00:00:00"}, "start"),
    ({"start": "0001-01-01T00:00:00+05:00"}, "start"),
    ({"end": "9999-12-31T23:59:59Z"}, "end"),
    ({"logs": [{"path": "bogus://x"}]}, "logs[0].path"),
    ({"logs": [{"path": 5}]}, "logs[0].path"),
    ({"logs": [{"path": "app.log", "source": ["applog"]}]}, "logs[0].source"),
    ({"metrics": [{"path": "bogus://m.csv"}]}, "metrics[0].path"),
    ({"workload_id": "w" * 10_000}, "workload_id"),
    ({"timezone": "Europe/" + "x" * 10_000}, "timezone"),
    ({"workload_id": "a\x00b"}, "workload_id"),
    ({"workload_id": "a\nb"}, "workload_id"),
    ({"cluster": "c\rd"}, "cluster"),
    ({"nodes": ["node\n01"]}, "nodes[0]"),
    ({"gpus_per_node": 10**30}, "gpus_per_node"),
    ({"gpus_per_node": 1_000_000}, "gpus_per_node"),
    ({"cluster": "t/a", "workload_id": "b"}, "cluster"),
    ({"workload_id": "\u00e9" * 190}, "workload_id"),  # short, but its path-safe key is not
]


@pytest.mark.parametrize("extra, field", CASES)
def test_bad_static_context_is_exit_2_naming_the_field(tmp_path, capsys, extra, field):
    (tmp_path / "app.log").write_text("hello\n")
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({**BASE, **extra}))
    code = main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"firstfault: {spec}: field '{field}': ") and err.count("\n") == 1, err


def test_yaml_only_cases(tmp_path, capsys):
    """Mixed-type keys (a null key beside a name), documents nested 100k deep, numbers of 5,000 digits."""
    cases = {
        "boot.yaml": "workload_id: w\nstart: '2026-11-29T01:00:00Z'\nnodes: [n1, '5']\n"
                     "boot_times: {n1: '2026-11-29T00:00:00Z', ~: '2026-11-29T00:00:00Z'}\n",
        "addresses.yaml": "workload_id: w\nstart: '2026-11-29T01:00:00Z'\nnodes: [n1]\naddresses: {n1: [10.0.0.1], null: [10.0.0.2]}\n",
        "deep.json": '{"workload_id": "w", "scheduler": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}",
        "deep.yaml": "workload_id: w\nscheduler: {x: " + "[" * 100_000 + "]" * 100_000 + "}\n",
        # more digits than Python reads as a number from text
        "digits.json": '{"workload_id": "w", "attempt": ' + "1" * 5000 + "}",
        "digits.yaml": "workload_id: w\nattempt: " + "1" * 5000 + "\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        code = main(["attribute", "--static", str(tmp_path / name), "--lake", str(tmp_path / "lake"),
                     "--warehouse", str(tmp_path / "w.duckdb")])
        err = capsys.readouterr().err
        # a whole-file problem names no field ("FILE: not valid JSON: ..."), a value its field
        assert code == 2 and err.startswith(f"firstfault: {tmp_path / name}: ") and err.count("\n") == 1, (name, err)


def test_bad_static_context_over_http_is_400(tmp_path):
    (tmp_path / "app.log").write_text("hello\n")
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "w.duckdb"))
    with Server(with_api(config, allowed_roots=(str(tmp_path),))) as api:
        for extra, field in CASES:
            body = {**BASE, **extra, "base_dir": str(tmp_path)}
            status, reply = api.request("POST", "/v1/attribute", body)
            assert status == 400 and reply["error"].startswith(f"request body: field '{field}': "), (extra, reply)
        status, reply = api.request("POST", "/v1/attribute", b'{"workload_id": "w", "attempt": ' + b"1" * 5000 + b"}")
        assert status == 400 and "not valid JSON" in reply["error"]


def test_ids_round_trip():
    """`<cluster>/<workload_id>/<attempt>` reads back: a cluster with `/` would make two attempts one."""
    ctx = context_from_dict({**BASE, "cluster": "t", "workload_id": "a/b"}, "<test>", ".")
    cluster, _, rest = ctx.attempt_id.partition("/")
    workload, _, attempt = rest.rpartition("/")
    assert (cluster, workload, int(attempt)) == ("t", "a/b", 0) and ctx.attempt_id == attempt_id("t", "a/b", 0)


def test_flight_recorder_values_too_large_for_their_columns_are_dropped_not_fatal(tmp_path, capsys):
    big = 10**30
    entry = {"process_group": ["0", "default"], "pg_id": 0, "collective_seq_id": big, "p2p_seq_id": -big,
             "profiling_name": "nccl:all_reduce", "state": "scheduled", "time_created_ns": big,
             "time_discovered_started_ns": 2**63, "input_sizes": [[big]], "output_sizes": [[1]], "is_p2p": False}
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "_dump_0").write_bytes(pickle.dumps({"rank": big, "entries": [entry]}))
    (tmp_path / "fr" / "_dump_99999999999999").write_bytes(pickle.dumps({"entries": [entry]}))
    spec = tmp_path / "attempt.yaml"
    spec.write_text(yaml.safe_dump({**BASE, "logs": [], "flight_recorder": ["fr/_dump_*"]}))
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    assert main(["attribute", "--static", str(spec), *args]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["sql", *args, "SELECT status FROM connector_reports WHERE uri LIKE '%_dump_%' ORDER BY uri", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["status", "ok", "error"]


# --- any document: a context or BadInput, nothing else -------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**40), max_value=10**40), st.floats(allow_nan=True),
    st.text(max_size=30), st.sampled_from(["node-01", "2026-11-29T01:00:00Z", "0001-01-01", "bogus://x", "a/b", "UTC",
                                           "app.log", "\x00", "\n", "x" * 300, "{node}", "rank", "node"]),
    st.datetimes(timezones=st.sampled_from([None, timezone.utc])),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(["path", "rank", "node", "local_rank", "source", "label", "node-01"]),
                              st.text(max_size=5), st.integers(-3, 3)), inner, max_size=4)), max_leaves=12)
documents = st.dictionaries(st.sampled_from(sorted(KNOWN_KEYS)), values, max_size=8).map(
    lambda d: {"workload_id": "w", "start": datetime(2026, 11, 29, 1), "nodes": ["node-01"], **d})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_document_is_a_context_or_bad_input(doc):
    try:
        ctx = context_from_dict(doc, "<fuzz>", "/tmp")
    except BadInput:
        return
    assert "/" not in ctx.cluster and len(ctx.attempt_key) <= 240 and ctx.gpus_per_node <= 1024
    assert len(ctx.rank_map()) <= len(ctx.nodes) * 1024 + len(ctx.ranks)


def test_a_static_context_that_never_ends_is_refused(tmp_path, capsys):
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(64 << 20)  # sparse: read as zeros
    for spec, problem in ((huge, "larger than 16 MiB: not a static context"), ("/dev/zero", "not a regular file (a device, a pipe or a folder)")):
        code = main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")])
        err = capsys.readouterr().err
        assert code == 2 and err == f"firstfault: {spec}: {problem}\n"
