"""Metric samples -> anomaly events (transforms/metric_events.py)."""
import io
import json

import polars as pl

from firstfault.schema import EVENT_SCHEMA
from firstfault.transforms.metric_events import metric_events

HEADER = "ts,node,metric,value,gpu,port"


def frame(*rows: str, uri: str = "file:///m/all.csv") -> pl.LazyFrame:
    df = pl.read_csv(io.StringIO("\n".join([HEADER, *rows]) + "\n"), schema_overrides={
        "ts": pl.String, "node": pl.String, "metric": pl.String, "value": pl.Float64, "gpu": pl.String, "port": pl.String})
    return df.with_row_index("line", offset=2).select(
        attempt_id=pl.lit("t/w/0"),
        ts=pl.col("ts").str.to_datetime("%Y-%m-%dT%H:%M:%SZ", time_unit="us"),
        node="node", metric="metric", value="value", gpu="gpu", port="port",
        source=pl.lit("metrics"), uri=pl.lit(uri), line=pl.col("line").cast(pl.Int64),
    ).lazy()


def events(*rows: str) -> pl.DataFrame:
    return metric_events(frame(*rows)).collect()


def test_empty_input_gives_an_empty_frame_with_the_event_schema():
    out = metric_events(frame()).collect()
    assert out.height == 0
    assert out.schema == pl.Schema(EVENT_SCHEMA)


def test_link_downed_delta_is_an_ib_counter_event_with_locator_and_raw():
    out = events(
        "2026-11-29T01:10:00Z,node-02,link_downed,3,,mlx5_0:1",
        "2026-11-29T01:11:00Z,node-02,link_downed,5,,mlx5_0:1",
    )
    assert out.schema == pl.Schema(EVENT_SCHEMA)
    row = out.row(0, named=True)
    assert (row["kind"], row["code"], row["code_text"], row["device"], row["port"]) == ("ib_counter", 2, "link_downed", "mlx5_0", 1)
    assert row["event_id"] == "metrics:0:3:ib_counter"
    assert (row["source"], row["uri"], row["line"], row["ts_quality"]) == ("metrics", "file:///m/all.csv", 3, "exact")
    assert row["raw"] == "2026-11-29T01:11:00Z,node-02,link_downed,5,,mlx5_0:1"
    assert json.loads(row["locator"]) == {"series": "link_downed{node=node-02,port=mlx5_0:1}", "sample_time": "2026-11-29T01:11:00Z"}


def test_counter_reset_is_not_an_error_but_the_next_increase_is():
    out = events(
        "2026-11-29T01:10:00Z,node-02,ib_symbol_error,900,,mlx5_0:1",
        "2026-11-29T01:11:00Z,node-02,ib_symbol_error,0,,mlx5_0:1",
        "2026-11-29T01:12:00Z,node-02,ib_symbol_error,0,,mlx5_0:1",
        "2026-11-29T01:13:00Z,node-02,ib_symbol_error,4,,mlx5_0:1",
    )
    assert out["kind"].to_list() == ["ib_counter"]
    assert out["code"].to_list() == [4]
    assert out["code_text"].to_list() == ["symbol_error"]


def test_node_exporter_and_prefixed_spellings_map_to_the_counter():
    out = events(
        "2026-11-29T01:10:00Z,node-01,node_infiniband_link_downed_total,0,,mlx5_1:1",
        "2026-11-29T01:11:00Z,node-01,node_infiniband_link_downed_total,1,,mlx5_1:1",
        "2026-11-29T01:10:00Z,node-01,infiniband_port_link_error_recovery,0,,mlx5_1:1",
        "2026-11-29T01:11:00Z,node-01,infiniband_port_link_error_recovery,2,,mlx5_1:1",
        "2026-11-29T01:10:00Z,node-01,node_infiniband_port_errors_received_total,0,,mlx5_1:1",
        "2026-11-29T01:11:00Z,node-01,node_infiniband_port_errors_received_total,7,,mlx5_1:1",
    )
    assert sorted(out["code_text"].to_list()) == ["link_downed", "link_error_recovery", "port_rcv_errors"]


def test_port_state_down_up_is_a_flap_with_its_outage():
    out = events(
        "2026-11-29T01:10:00Z,node-02,ib_port_state,4,,mlx5_0:1",
        "2026-11-29T01:10:30Z,node-02,ib_port_state,1,,mlx5_0:1",
        "2026-11-29T01:11:00Z,node-02,ib_port_state,1,,mlx5_0:1",
        "2026-11-29T01:11:30Z,node-02,ib_port_state,4,,mlx5_0:1",
        "2026-11-29T01:12:00Z,node-02,ib_port_state,4,,mlx5_0:1",
    )
    assert sorted(out["kind"].to_list()) == ["ib_port_down", "ib_port_flap", "ib_port_up"]
    flap = out.filter(pl.col("kind") == "ib_port_flap").row(0, named=True)
    assert json.loads(flap["fields"])["outage_s"] == 60.0
    assert json.loads(flap["fields"])["down_ts"] == "2026-11-29T01:10:30Z"
    assert out["event_id"].n_unique() == out.height


def test_a_port_down_from_the_start_is_no_transition_and_a_bare_state_needs_a_port():
    out = events(
        "2026-11-29T01:10:00Z,node-02,phys_state,3,,mlx5_5:1",
        "2026-11-29T01:11:00Z,node-02,phys_state,3,,mlx5_5:1",
        "2026-11-29T01:10:00Z,node-02,state,4,,",
        "2026-11-29T01:11:00Z,node-02,state,1,,",
    )
    assert out.height == 0


def test_dcgm_xid_change_is_an_event_with_the_normalised_gpu():
    out = events(
        "2026-11-29T01:10:00Z,node-01,DCGM_FI_DEV_XID_ERRORS,0,00000000:61:00.0,",
        "2026-11-29T01:11:00Z,node-01,DCGM_FI_DEV_XID_ERRORS,79,00000000:61:00.0,",
        "2026-11-29T01:12:00Z,node-01,DCGM_FI_DEV_XID_ERRORS,79,00000000:61:00.0,",
    )
    assert out.select("kind", "code", "gpu").rows() == [("dcgm_xid", 79, "0000:61:00")]


def test_dcgm_counters_and_row_remap():
    out = events(
        "2026-11-29T01:10:00Z,node-01,DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,0,0,",
        "2026-11-29T01:11:00Z,node-01,DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,1,0,",
        "2026-11-29T01:10:00Z,node-01,DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL,10,0,",
        "2026-11-29T01:11:00Z,node-01,DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL,12,0,",
        "2026-11-29T01:10:00Z,node-01,DCGM_FI_DEV_ROW_REMAP_FAILURE,0,0,",
        "2026-11-29T01:11:00Z,node-01,DCGM_FI_DEV_ROW_REMAP_FAILURE,1,0,",
        "2026-11-29T01:12:00Z,node-01,DCGM_FI_DEV_ROW_REMAP_FAILURE,1,0,",
    )
    got = sorted(out.select("kind", "code", "code_text").rows())
    assert got == [("dcgm_ecc_dbe", 1, "ecc_dbe_vol_total"), ("dcgm_nvlink_errors", 2, "nvlink_replay_error_total"),
                   ("dcgm_row_remap", 1, "failure")]
    assert all(json.loads(f)["gpu_index"] == "0" for f in out["fields"])


def test_throttle_bits_classify_thermal_and_power_and_count_the_run():
    out = events(
        "2026-11-29T01:10:00Z,node-01,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,1,3,",      # idle: not throttled
        "2026-11-29T01:11:00Z,node-01,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,72,3,",     # HW slowdown + HW thermal
        "2026-11-29T01:12:00Z,node-01,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,128,3,",    # HW power brake
        "2026-11-29T01:13:00Z,node-01,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,4,3,",      # SW power cap only: not counted
    )
    assert out.select("code_text", "code").rows() == [("thermal", 72), ("power", 128)]
    assert [json.loads(f)["run"] for f in out["fields"]] == [1, 2]


def test_healthy_series_give_no_events():
    out = events(
        "2026-11-29T01:10:00Z,node-01,DCGM_FI_DEV_GPU_TEMP,60,0,",
        "2026-11-29T01:11:00Z,node-01,DCGM_FI_DEV_GPU_TEMP,90,0,",
        "2026-11-29T01:10:00Z,node-01,link_downed,2,,mlx5_0:1",
        "2026-11-29T01:11:00Z,node-01,link_downed,2,,mlx5_0:1",
    )
    assert out.height == 0
