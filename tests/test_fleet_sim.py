"""Acceptance: in a simulated fleet with one bad switch port and one lemon node, `port_hotspots` and
`node_offenders` put them first.

The simulator records what it injected in DIR/fleet_truth.json (never derived from the rules); the fleet is run through
the nightly (plain functions, no Prefect) day by day, then `fleet.rebuild` with the simulated topology.
"""
from __future__ import annotations

import json
from datetime import timedelta

import yaml

from firstfault.warehouse import fleet
from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.nightly import run_nightly
from firstfault.synthetic.simulate import T0, read_truth, simulate

from conftest import warehouse_rows

DAYS = 3
# A small fleet (2 leaf switches of 16 ports) whose repeat offenders still show up several times: one lemon that takes
# most hardware faults, and more ib_link faults than the Llama 3 mix gives 50 attempts, most of them behind the bad port.
PARAMS = dict(nodes=32, attempts=50, days=DAYS, seed=2, lines=(20, 40), lemons=1, lemon_share=0.6,
              bad_port_share=0.8, weights={"ib_link": 120}, max_job_nodes=6)


def test_lemon_node_and_bad_port_come_first(tmp_path):
    root = tmp_path / "fleet"
    simulate(root, **PARAMS)
    injected = json.loads((root / "fleet_truth.json").read_text())
    assert len(injected["lemon_nodes"]) == 1
    lemon, bad = injected["lemon_nodes"][0], injected["bad_port"]
    topology = root / "topology.yaml"
    assert yaml.safe_load(topology.read_text())["nodes"][bad["node"]] == {"switch": bad["switch"], "port": bad["port"]}

    # the injection really hit them several times (truth.jsonl, again from the injection)
    truth = read_truth(root)
    lemon_faults = [t for t in truth if t["kind"] in ("gpu_lost", "gpu_nvlink", "gpu_firmware", "gpu_memory") and t["culprit_nodes"] == [lemon]]
    port_faults = [t for t in truth if t["kind"] == "ib_link" and t["culprit_nodes"] == [bad["node"]]]
    assert len(lemon_faults) >= 3 and len(port_faults) >= 3, (len(lemon_faults), len(port_faults))

    config = Config(lake=LakeSettings(root=str(tmp_path / "lake")), warehouse=WarehouseSettings(path=str(tmp_path / "wh.duckdb")))
    attributed = 0
    for d in range(DAYS + 1):  # attempts end up to 4 h after they start: one day more
        summary = run_nightly(config, (T0.date() + timedelta(days=d)).isoformat(), str(root / "catalog"))
        assert summary["failed"] == 0, summary
        attributed += summary["attributed"]
    assert attributed == len(truth)
    fleet.rebuild(config.warehouse.path, config, topology=str(topology))

    offenders = warehouse_rows(config.warehouse.path, "SELECT level, node, recommendation, hardware_30d FROM node_offenders ORDER BY position")
    assert offenders[0]["node"] == lemon, offenders[:5]
    assert offenders[0]["recommendation"] in ("hardware_inspection", "drain"), offenders[0]

    hot = warehouse_rows(config.warehouse.path, "SELECT level, key, finding, attempts, node_list FROM port_hotspots ORDER BY position")
    port_key = f"{bad['switch']}/{bad['port']}"
    first_port = next(h for h in hot if h["level"] == "switch_port")
    first_nic = next(h for h in hot if h["level"] == "nic")
    assert first_port["key"] == port_key and first_port["node_list"] == [bad["node"]], hot[:5]
    assert first_nic["key"].split("/")[0] == bad["node"], hot[:5]
    assert first_port["attempts"] >= len(port_faults)
    # the bad port is the first row: its leaf switch, whose attempts all come through that port, points at it
    assert hot[0]["key"] == port_key, hot[:5]
    leaf = next(h for h in hot if h["level"] == "switch" and h["key"] == bad["switch"])
    assert leaf["finding"] == "switch_port", leaf
