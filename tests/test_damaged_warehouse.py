"""A warehouse cut short (a full disk, a partial copy) is named and refused everywhere: `sql`, `report` and
`attribute` exit 2 with one line naming the file; the API answers 503 without the server's path or a traceback."""
import os

import pytest
import yaml
from test_api import Server, with_api

from firstfault.cli import main
from firstfault.config import resolve_config

XID = "Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"


@pytest.fixture()
def truncated(tmp_path, capsys):
    """(attempt.yaml, warehouse) with the warehouse cut to half its size after one attribution."""
    (tmp_path / "node-01.log").write_text(XID)
    spec = tmp_path / "attempt.yaml"
    spec.write_text(yaml.safe_dump({"workload_id": "w", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z",
                                    "nodes": ["node-01"], "state": "FAILED", "logs": [{"source": "syslog", "path": "node-01.log"}]}))
    warehouse = tmp_path / "w.duckdb"
    assert main(["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake"), "--warehouse", str(warehouse)]) == 0
    os.truncate(warehouse, warehouse.stat().st_size // 2)
    capsys.readouterr()
    return spec, warehouse


@pytest.mark.parametrize("command", ["sql", "report", "attribute"])
def test_a_truncated_warehouse_is_bad_input_naming_the_file(truncated, tmp_path, capsys, command):
    spec, warehouse = truncated
    argv = {"sql": ["sql", "--warehouse", str(warehouse), "SELECT count(*) FROM attributions"],
            "report": ["report", "--warehouse", str(warehouse), "--out", str(tmp_path / "report")],
            "attribute": ["attribute", "--static", str(spec), "--lake", str(tmp_path / "lake"), "--warehouse", str(warehouse)]}
    assert main(argv[command]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"firstfault: {warehouse}: field 'warehouse': truncated: ") and len(err.splitlines()) == 1, err


def test_the_api_answers_503_for_a_truncated_warehouse(truncated, tmp_path):
    _, warehouse = truncated
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(warehouse))
    with Server(with_api(config)) as api:
        status, body = api.request("GET", "/v1/attempts/default/w/0")
    assert status == 503 and "damaged" in body["error"] and str(tmp_path) not in body["error"], body
