"""Arbitrary bytes in a log never crash a run: they are counted, skipped or kept, and a verdict still comes out."""
from datetime import datetime

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import context_from_dict
from firstfault.run import attribute, land
from firstfault.transforms.decorations import strip_decorations
from firstfault.transforms.extract import extract_events, load_patterns
from firstfault.transforms.lines import split_lines
from firstfault.transforms.placement import place_lines
from firstfault.transforms.timestamps import parse_timestamps

PATTERNS = load_patterns()
# realistic fragments mixed into random bytes, so the parsers see half-valid lines too
FRAGMENTS = [
    b"NVRM: Xid (PCI:0000:3b:00): ", b"Nov 29 01:40:03 node-01 kernel: ", b"[ 5107.644336] ", b"3: [rank3]:[E1129 ",
    b"NCCL WARN NET/IB : Got completion from peer ", b"Traceback (most recent call last):\n", b"  exitcode  : -6 (pid: ",
    b"\n", b"\r\n", b"\x00", b"\xff\xfe", b"WorkNCCL(SeqNum=", b"slurmstepd: error: *** JOB ",
]
junk = st.lists(st.one_of(st.binary(max_size=200), st.sampled_from(FRAGMENTS)), max_size=40).map(b"".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk)
def test_transforms_never_raise(data):
    lines, _ = split_lines(data, 1, 1024)
    lf = strip_decorations(lines.lazy())
    lf = parse_timestamps(lf, tz="UTC", window_start=datetime(2026, 11, 29, 1), window_end=datetime(2026, 11, 29, 2))
    lf = place_lines(lf, nodes=["node-01"], rank_map=[(0, "node-01", 0)], file_node=None, file_rank=None, label_mode="rank")
    frame = lf.with_columns(
        attempt_id=pl.lit("f/f/0"), source=pl.lit("applog"), uri=pl.lit("file:///x"), file_index=pl.lit(0, pl.Int32)
    ).collect()
    extract_events(frame.lazy(), PATTERNS).collect()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(junk)
def test_full_run_survives_garbage(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("fuzz")
    (root / "app.log").write_bytes(data)
    ctx = context_from_dict(
        {"workload_id": "fuzz", "start": "2026-11-29T01:00:00Z", "nodes": ["node-01"], "logs": [{"path": "app.log"}]},
        str(root / "attempt.yaml"), str(root),
    )
    config = Config(lake=LakeSettings(str(root / "lake")), warehouse=WarehouseSettings(str(root / "w.duckdb")))
    land([ctx], config)
    verdicts = attribute([ctx], config).tables["attributions"].to_pylist()
    assert len(verdicts) == 1 and verdicts[0]["verdict"] in ("attributed", "ambiguous", "unattributed", "not_failed")
