"""Fleet aggregates (warehouse/fleet.sql, warehouse/fleet.py) over a synthetic warehouse: a lemon node, a bad switch
port, noise; rates with exact Poisson intervals; incidents; idempotent rebuilds."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from firstfault.config import Config
from firstfault.schema import FLEET_TABLES
from firstfault.warehouse.fleet import poisson_interval, rebuild
from firstfault.warehouse.store import connect_writer

from conftest import warehouse_rows

RUN_DAY = "2026-11-20"
TOPOLOGY = """\
nodes:
  sw-a: {switch: leaf-2, port: 7}
  sw-b: {switch: leaf-2, port: 7}
  sw-c: {switch: leaf-2, port: 7}
  sw-d: {switch: leaf-2, port: 9}
  p-01: {switch: leaf-1, port: 1}
  p-02: {switch: leaf-3, port: 1}
  p-03: {switch: leaf-4, port: 1}
  p-04: {switch: leaf-5, port: 1}
  p-05: {switch: leaf-6, port: 1}
  p-06: {switch: leaf-8, port: 1}
  n-01: {switch: leaf-1, port: 2}
  n-02: {switch: leaf-3, port: 2}
"""


def _attempt(con, attempt_id, *, start, hours, verdict, domain=None, culprits=(), nodes=None, gpu_model="H100",
             gpus_per_node=8, event=None, code=None, node=None, gpu=None):
    start_ts = datetime.fromisoformat(start)
    end_ts = start_ts + timedelta(hours=hours)
    nodes = list(nodes or culprits or ["x-01"])
    con.execute(
        """INSERT INTO attributions BY NAME SELECT
               ?::VARCHAR AS attempt_id, 'w' AS workload_id, 0 AS attempt, 'test' AS cluster, 'FAILED' AS state,
               ?::VARCHAR AS verdict, ?::VARCHAR AS domain,
               CASE WHEN ?::VARCHAR = 'attributed' THEN struct_pack(rule := 'r', event := ?::VARCHAR, code := ?::BIGINT,
                   node := ?::VARCHAR, gpu := ?::VARCHAR, rank := NULL::INTEGER, ts := NULL::VARCHAR, summary := 's') END
                   AS root_cause,
               ?::VARCHAR[] AS culprit_nodes, ?::VARCHAR AS day, ?::TIMESTAMP AS start_ts, ?::TIMESTAMP AS end_ts,
               ?::VARCHAR AS gpu_model, ?::INTEGER AS gpus_per_node, ?::VARCHAR[] AS nodes""",
        [attempt_id, verdict, domain, verdict, event, code, node or (culprits[0] if culprits else None), gpu,
         list(culprits), start_ts.date().isoformat(), start_ts, end_ts, gpu_model, gpus_per_node, nodes],
    )


def _event(con, attempt_id, event_id, kind, *, node, ts, code=None, code_text=None, peer_node=None, device=None,
           port=None, gpu=None, fields=None):
    con.execute(
        """INSERT INTO events (attempt_id, event_id, kind, code, code_text, node, gpu, ts, peer_node, device, port, fields)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [attempt_id, event_id, kind, code, code_text, node, gpu, datetime.fromisoformat(ts), peer_node, device, port,
         json.dumps(fields) if fields else None],
    )


def _build(path):
    con = connect_writer(str(path))
    try:
        # --- the lemon: 3 hardware attributions in 10 days, Xid 48 twice on the same GPU (same UUID)
        for i, (day, code) in enumerate([("2026-11-10", 48), ("2026-11-15", 79), ("2026-11-19", 48)]):
            aid = f"test/lemon/{i}"
            _attempt(con, aid, start=f"{day}T01:00:00", hours=2, verdict="attributed", domain="hardware",
                     culprits=["lemon-01"], nodes=["lemon-01", "x-01"], event="xid", code=code, gpu="0000:3b:00")
            _event(con, aid, "syslog:0:1:gpu_identity", "gpu_identity", node="lemon-01", gpu="0000:3b:00",
                   ts=f"{day}T00:00:00", fields={"uuid": "GPU-aaaa"})
            # the NCCL cascade of the GPU failure: not a network implication
            _event(con, aid, "applog:0:9:nccl_net_ib", "nccl_net_ib", node="x-01", peer_node="lemon-01", code=12,
                   device="mlx5_0", port=1, ts=f"{day}T02:00:00")
        # --- drain-level node: 2 hardware attributions in 14 days, Xid 94 twice (exempt from inspection)
        for i, day in enumerate(["2026-11-08", "2026-11-17"]):
            _attempt(con, f"test/hw94/{i}", start=f"{day}T03:00:00", hours=1, verdict="attributed", domain="hardware",
                     culprits=["hw-94"], event="xid", code=94, gpu="0000:61:00")
        # --- bad switch port: 6 attempts whose NET/IB errors point at nodes under leaf-2 port 7
        targets = ["sw-a", "sw-b", "sw-c", "sw-a", "sw-b", "sw-c"]
        days = ["2026-11-14", "2026-11-15", "2026-11-16", "2026-11-17", "2026-11-19", "2026-11-19"]
        for i, (target, day) in enumerate(zip(targets, days)):
            aid = f"test/port/{i}"
            reporter = f"p-0{i + 1}"
            _attempt(con, aid, start=f"{day}T0{i}:00:00", hours=1,
                     verdict="attributed" if i % 2 == 0 else "unattributed",
                     domain="network" if i % 2 == 0 else None, culprits=[target] if i % 2 == 0 else [],
                     nodes=[reporter, target], event="nccl_net_ib", code=12, node=target)
            _event(con, aid, "applog:0:10:nccl_net_ib", "nccl_net_ib", node=reporter, peer_node=target, code=12,
                   device="mlx5_0", port=1, ts=f"{day}T0{i}:30:00")
            _event(con, aid, "applog:0:11:nccl_net_ib", "nccl_net_ib", node=reporter, peer_node=target, code=12,
                   device="mlx5_0", port=1, ts=f"{day}T0{i}:30:01")
            # secondary WR_FLUSH_ERR from an unrelated node: ignored
            _event(con, aid, "applog:0:12:nccl_net_ib", "nccl_net_ib", node="sw-d", peer_node="n-01", code=5,
                   ts=f"{day}T0{i}:30:02")
        # --- noise: one edge, one link-down event, a not-failed attempt, an application failure
        _attempt(con, "test/noise/0", start="2026-11-18T10:00:00", hours=1, verdict="unattributed", nodes=["n-01", "n-02"])
        _event(con, "test/noise/0", "applog:0:1:nccl_net_ib", "nccl_net_ib", node="n-01", peer_node="n-02", code=12,
               device="mlx5_1", port=1, ts="2026-11-18T10:30:00")
        _event(con, "test/noise/0", "syslog:0:5:ib_link", "ib_link", node="n-02", code_text="down", device="ib0",
               ts="2026-11-18T10:29:00")
        _attempt(con, "test/ok/0", start="2026-11-18T00:00:00", hours=10, verdict="not_failed", nodes=["ok-01", "ok-02"])
        # --- incident: the same node named by two application failures on one day
        for i in range(2):
            _attempt(con, f"test/app/{i}", start=f"2026-11-18T1{i}:00:00", hours=1, verdict="attributed",
                     domain="application", culprits=["inc-05"], event="python_exception")
        # --- B200 trend: 4 attempts x 8 GPUs x 5 nodes x 12.5 h = 2,000 GPU-hours in ISO week 2026-W47, 3 hardware
        for i in range(4):
            failed = i < 3
            _attempt(con, f"test/b200/{i}", start=f"2026-11-1{6 + i}T00:00:00", hours=12.5,
                     verdict="attributed" if failed else "not_failed", domain="hardware" if failed else None,
                     culprits=[f"b-0{i}"] if failed else [], nodes=[f"b-0{i}", "b-10", "b-11", "b-12", "b-13"],
                     gpu_model="B200", event="xid" if failed else None, code=79 if failed else None,
                     gpu="0000:18:00" if failed else None)
        # --- an attempt after the run day: outside every window
        _attempt(con, "test/future/0", start="2026-11-25T01:00:00", hours=1, verdict="attributed", domain="hardware",
                 culprits=["hw-94"], event="xid", code=94, gpu="0000:61:00")
    finally:
        con.close()


@pytest.fixture(scope="module")
def fleet_wh(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    path = root / "wh.duckdb"
    topo = root / "topology.yaml"
    topo.write_text(TOPOLOGY, encoding="utf-8")
    _build(path)
    counts = rebuild(str(path), Config(), day=RUN_DAY, topology=str(topo))
    return path, topo, counts


def test_poisson_interval_matches_chi_square_values():
    assert poisson_interval(0) == (0.0, pytest.approx(3.688879, abs=1e-5))
    lo, hi = poisson_interval(3)  # chi2_0.025(6)/2, chi2_0.975(8)/2
    assert (round(lo, 4), round(hi, 4)) == (0.6187, 8.7673)
    lo, hi = poisson_interval(10)
    assert (round(lo, 3), round(hi, 3)) == (4.795, 18.390)


def test_node_offenders_lemon_first(fleet_wh):
    path, _, counts = fleet_wh
    assert counts["node_offenders"] > 0
    rows = warehouse_rows(path, "SELECT * FROM node_offenders ORDER BY position")
    first = rows[0]
    assert (first["level"], first["node"]) == ("node", "lemon-01")
    assert first["recommendation"] == "hardware_inspection" and first["severity"] == 3
    assert first["hardware_30d"] == 3 and first["hardware_7d"] == 2 and first["hardware_drain_window"] == 3
    assert first["repeated_xid"] == 48 and first["xid_repeats"] == 2
    assert first["attempts_affected"] == 3 and first["first_seen"] < first["last_seen"]
    gpu = next(r for r in rows if r["level"] == "gpu" and r["node"] == "lemon-01")
    assert (gpu["gpu"], gpu["gpu_uuid"], gpu["recommendation"]) == ("0000:3b:00", "GPU-aaaa", "hardware_inspection")
    by_node = {r["node"]: r for r in rows if r["level"] == "node"}
    # Xid 94 twice: exempt from inspection, but two hardware attributions within 14 days drain the node;
    # the attempt after the run day does not count
    assert by_node["hw-94"]["recommendation"] == "drain" and by_node["hw-94"]["hardware_30d"] == 2
    assert by_node["b-00"]["recommendation"] == "watch"
    assert by_node["inc-05"]["application_7d"] == 2
    assert [r["position"] for r in rows] == list(range(1, len(rows) + 1))


def test_node_offenders_position_follows_the_sort_key_it_shows(fleet_wh):
    path, _, _ = fleet_wh
    rows = warehouse_rows(path, "SELECT * FROM node_offenders ORDER BY position")
    key = [(-r["severity"], -r["reason_count"], -r["failures_30d"], -r["attempts_affected"]) for r in rows]
    assert key == sorted(key)
    for r in rows:  # the count is the one the reason states
        assert f"{r['reason_count']} " in r["reason"] or f"({r['reason_count']})" in r["reason"], r
    by_node = {r["node"]: r for r in rows if r["level"] == "node"}
    # both `watch`: two application failures rank above one hardware failure
    assert (by_node["inc-05"]["reason_count"], by_node["b-00"]["reason_count"]) == (2, 1)
    assert by_node["inc-05"]["position"] < by_node["b-00"]["position"]


def test_port_hotspots_bad_switch_port_first(fleet_wh):
    path, _, _ = fleet_wh
    rows = warehouse_rows(path, "SELECT * FROM port_hotspots ORDER BY position")
    first = rows[0]
    assert (first["level"], first["key"], first["finding"]) == ("switch_port", "leaf-2/7", "switch_port")
    assert first["attempts"] == 6 and first["nodes"] == 3
    assert first["attributed_network"] == 3 and first["unattributed"] == 3
    nic = {r["key"]: r for r in rows if r["level"] == "nic"}
    assert nic["sw-a"]["attempts"] == 2 and nic["sw-a"]["finding"] == "nic"  # two reporters toward one NIC
    assert nic["p-01/mlx5_0:1"]["finding"] == "link"                       # one counterpart: the edge
    assert "sw-d" not in nic                                                # WR_FLUSH_ERR (status 5) ignored
    assert "n-02/ib0" in nic                                                # kernel link-down event
    assert "lemon-01" not in nic and "x-01/mlx5_0:1" not in nic             # cascade of a hardware cause
    links = {r["key"] for r in rows if r["level"] == "link"}
    assert "n-01 <-> n-02" in links and "p-01 <-> sw-a" in links


def test_gpu_model_trends_rates_and_intervals(fleet_wh):
    path, _, _ = fleet_wh
    rows = {(r["gpu_model"], r["iso_week"], r["domain"]): r for r in warehouse_rows(path, "SELECT * FROM gpu_model_trends")}
    hw = rows[("B200", "2026-W47", "hardware")]
    assert hw["gpu_hours"] == pytest.approx(2000.0) and hw["failures"] == 3 and hw["attempts"] == 4
    assert round(hw["rate_per_1k_gpu_hours"], 3) == 1.5
    assert (round(hw["rate_lower"], 3), round(hw["rate_upper"], 3)) == (0.309, 4.384)
    net = rows[("B200", "2026-W47", "network")]
    assert net["failures"] == 0 and net["rate_lower"] == 0.0 and round(net["rate_upper"], 3) == 1.844
    assert rows[("B200", "2026-W47", "all")]["failures"] == 3
    assert ("H100", "2026-W48", "all") not in rows  # after the run day


def test_incidents_group_attempts_of_one_day(fleet_wh):
    path, _, _ = fleet_wh
    rows = warehouse_rows(path, "SELECT * FROM incidents")
    by = {(r["kind"], r["key"], r["day"]): r for r in rows}
    app = by[("node", "inc-05", "2026-11-18")]
    assert app["members"] == ["test/app/0", "test/app/1"] and app["domain"] == "application"
    assert app["recommendation"] == "watch"
    port = by[("switch_port", "leaf-2/7", "2026-11-19")]
    assert port["members"] == ["test/port/4", "test/port/5"] and port["recommendation"] == "inspect_port"
    assert port["domain"] == "network"  # the unattributed member has no domain: the known one stands
    assert len({r["incident_id"] for r in rows}) == len(rows)
    assert all(r["attempts"] >= 2 for r in rows)
    assert not any(k == "lemon-01" for _, k, _ in by)  # lemon failures are on different days


def test_rebuild_is_idempotent_and_cli_runs(fleet_wh, tmp_path):
    path, topo, _ = fleet_wh
    snap = lambda: {t: warehouse_rows(path, f"SELECT * FROM {t}") for t in FLEET_TABLES}  # noqa: E731
    before = snap()
    rebuild(str(path), replace(Config(), fleet=replace(Config().fleet, topology=str(topo))), day=RUN_DAY)
    assert snap() == before
    from firstfault.cli import main

    assert main(["fleet", "rebuild", "--warehouse", str(path), "--topology", str(topo), "--day", RUN_DAY]) == 0
    assert snap() == before
    # an empty warehouse still gets the four (empty) tables
    empty = tmp_path / "empty.duckdb"
    connect_writer(str(empty)).close()
    assert rebuild(str(empty)) == {t: 0 for t in FLEET_TABLES}


def test_topology_csv_and_bad_file(tmp_path):
    from firstfault.errors import BadInput
    from firstfault.warehouse.fleet import load_topology

    csv_file = tmp_path / "topo.csv"
    csv_file.write_text("node,switch,port,device\nsw-a,leaf-2,7,\nsw-a,leaf-9,3,mlx5_1\n", encoding="utf-8")
    rows = load_topology(str(csv_file)).to_pylist()
    assert rows == [{"node": "sw-a", "device": None, "switch": "leaf-2", "switch_port": "7"},
                    {"node": "sw-a", "device": "mlx5_1", "switch": "leaf-9", "switch_port": "3"}]
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {node: x}\n", encoding="utf-8")
    with pytest.raises(BadInput):
        load_topology(str(bad))
