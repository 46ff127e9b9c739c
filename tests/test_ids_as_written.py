"""Ids mean what they say: `workload_id`, `cluster` and node names keep the text written in a YAML file (a plain
scalar YAML would read as a number, a time or a float is not converted), ids with leading or trailing spaces are
refused naming the field, and a JSON id that is not a string is refused (exit 2; API: 400)."""
import json

import pytest

from firstfault.cli import main
from firstfault.config import resolve_config
from firstfault.connectors.static_context import load_static_context
from test_api import Server, with_api

HEAD = "start: '2026-11-29T01:00:00Z'\n"
# pairs of values that YAML's own conversions would make one id
COERCED = [("0x1F", "'31'"), ("017", "'15'"), ("12:30", "'750'"), ("1.10", "'1.1'"), ("1_000", "'1000'"), ("true", "'True'"),
           ("2026-11-29", "'2026-11-29 00:00:00'")]


def load(tmp_path, text: str, name: str = "attempt.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_static_context(str(path))


@pytest.mark.parametrize("plain, quoted", COERCED)
def test_plain_scalars_keep_their_text_as_ids(tmp_path, plain, quoted):
    a = load(tmp_path, f"{HEAD}workload_id: {plain}\ncluster: {plain}\nnodes: [{plain}, {quoted}]\n"
                       f"ranks: [{{rank: 0, node: {plain}}}]\nboot_times: {{{plain}: '2026-11-29T00:00:00Z'}}\n"
                       f"addresses: {{{plain}: [10.0.0.1]}}\n")
    b = load(tmp_path, f"{HEAD}workload_id: {quoted}\ncluster: {quoted}\nnodes: [{quoted}]\n")
    assert (a.workload_id, a.cluster, a.nodes[0]) == (plain, plain, plain)
    assert a.ranks == ((0, plain, 0),) and [n for n, _ in a.boot_times] == [plain] and a.addresses == (("10.0.0.1", plain),)
    assert a.attempt_id != b.attempt_id and len(set(a.nodes)) == 2


def test_a_null_id_is_still_missing(tmp_path, capsys):
    spec = tmp_path / "attempt.yaml"
    spec.write_text(f"{HEAD}workload_id: ~\nnodes: [n1]\n")
    assert main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake")]) == 2
    assert "field 'workload_id': required" in capsys.readouterr().err


@pytest.mark.parametrize("text, field", [
    ("workload_id: 'job '\nnodes: [n1]\n", "workload_id"),
    ("workload_id: ' job'\nnodes: [n1]\n", "workload_id"),
    ("workload_id: job\ncluster: 'c\t'\nnodes: [n1]\n", "cluster"),
    ("workload_id: job\nnodes: [n1, ' n2']\n", "nodes[1]"),
])
def test_ids_with_surrounding_spaces_are_refused(tmp_path, capsys, text, field):
    spec = tmp_path / "attempt.yaml"
    spec.write_text(HEAD + text)
    assert main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"firstfault: {spec}: field '{field}': must not start or end with spaces") and err.count("\n") == 1


JSON_IDS = [({"workload_id": 31}, "workload_id"), ({"workload_id": 1.1}, "workload_id"), ({"cluster": 7}, "cluster"),
            ({"nodes": ["n1", 17]}, "nodes[1]")]


@pytest.mark.parametrize("changes, field", JSON_IDS)
def test_json_ids_that_are_not_strings_are_refused(tmp_path, capsys, changes, field):
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({"workload_id": "w", "start": "2026-11-29T01:00:00Z", "nodes": ["n1"], **changes}))
    assert main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake")]) == 2
    assert capsys.readouterr().err.startswith(f"firstfault: {spec}: field '{field}': must be a string")


def test_api_refuses_ids_that_are_not_strings(tmp_path):
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "w.duckdb"))
    with Server(with_api(config, allowed_roots=(str(tmp_path),))) as api:
        for changes, field in JSON_IDS:
            body = {"workload_id": "w", "start": "2026-11-29T01:00:00Z", "nodes": ["n1"], "base_dir": str(tmp_path), **changes}
            status, reply = api.request("POST", "/v1/attribute", body)
            assert status == 400 and reply["error"].startswith(f"request body: field '{field}': must be a string"), reply
