"""Progress markers land as `progress` rows (one per file, node, rank and minute) and only each rank's first and
last marker as events; the rows do not depend on how the landing split the lines."""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from firstfault.config import LandingSettings
from firstfault.connectors.static_context import context_from_dict
from firstfault.lake import Lake
from firstfault.landing import land_attempt
from firstfault.transforms.extract import load_patterns

T0 = datetime(2026, 11, 29, 1, 0)
RANKS = (0, 1, 7)


def megatron(at: datetime, it: int, nan: int = 0) -> str:
    """Megatron's iteration line (the shape of https://github.com/epfLLM/Megatron-LLM/issues/33) after srun's label and
    a stamp, with advancing values."""
    return (f"[{at:%Y-%m-%d %H:%M:%S}] iteration {it:8d}/    8000 | consumed samples: {it * 64:12d} | elapsed time per "
            f"iteration (ms): {7600 + it % 97:.1f} | learning rate: 6.680E-06 | global batch size:    64 | lm loss: "
            f"{0.7 + it / 1e5:.6E} | loss scale: 1.0 | grad norm: 0.752 | number of skipped iterations:   0 | "
            f"number of nan iterations: {nan:3d} |")


def write_attempt(root) -> object:
    lines = ["0: iteration 5/8000 | a marker before any stamp: its minute is null"]
    for step in range(240):  # 4 minutes of a 1 s step on three ranks, a checkpoint every 100 iterations
        at = T0 + timedelta(seconds=step)
        for rank in RANKS:
            lines.append(f"{rank}: {megatron(at, 10 * step, nan=3 if step == 200 else 0)}")
        if step % 100 == 99:
            lines.append(f"0: [{at:%Y-%m-%d %H:%M:%S}] successfully saved checkpoint from iteration {10 * step:7d} to /ckpt")
        lines.append(f"{step % 3}: some other chatter {step}")
    (root / "app.log").write_text("\n".join(lines) + "\n")
    doc = {"workload_id": "progress", "start": "2026-11-29T00:59:00Z", "end": "2026-11-29T01:30:00Z", "nodes": ["n1", "n2"],
           "gpus_per_node": 4, "logs": [{"source": "applog", "path": "app.log", "label": "rank"}]}
    return context_from_dict(doc, str(root / "attempt.yaml"), str(root))


def landed(lake: Lake, ctx, table: str) -> pl.DataFrame:
    frame = pl.from_arrow(lake.read(table, ctx.day, ctx.attempt_key))
    return frame.drop([c for c in ("day", "attempt_key") if c in frame.columns])


@pytest.fixture(scope="module")
def attempt(tmp_path_factory):
    return write_attempt(tmp_path_factory.mktemp("progress"))


def test_progress_rows_and_edge_events(attempt, tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    land_attempt(attempt, lake, load_patterns())
    progress, events = landed(lake, attempt, "progress"), landed(lake, attempt, "events")
    stamped = progress.filter(pl.col("minute").is_not_null())
    assert stamped.group_by("rank").agg(pl.col("markers").sum()).sort("rank").rows() == [(0, 242), (1, 240), (7, 240)]
    assert stamped.height == 3 * 4  # three ranks, four minutes
    rank0 = stamped.filter(pl.col("rank") == 0)
    assert rank0.get_column("iterations").sum() == 240  # the two saves name iterations already logged
    assert rank0.get_column("max_iteration").max() == 2390
    assert progress.filter(pl.col("minute").is_null()).select("rank", "markers", "max_iteration").rows() == [(0, 1, 5)]
    markers = events.filter(pl.col("kind") == "progress")
    # each rank's first and last stamped marker, and the unstamped one
    assert markers.select("rank", "iteration").sort("rank", "iteration").rows() == [
        (0, 0), (0, 5), (0, 2390), (1, 0), (1, 2390), (7, 0), (7, 2390)]
    assert set(rank0.get_column("last_event_id")) >= set(markers.filter(pl.col("rank") == 0).get_column("event_id")) - {
        *markers.filter((pl.col("rank") == 0) & pl.col("ts").is_null()).get_column("event_id"),
        *markers.filter((pl.col("rank") == 0) & (pl.col("iteration") == 0)).get_column("event_id")}
    # the counted NaN iterations are evidence, on every rank that printed them
    assert events.filter(pl.col("kind") == "nan_loss").get_column("rank").sort().to_list() == list(RANKS)


@pytest.mark.parametrize("batch_lines", [7, 100, 5000])
def test_rows_do_not_depend_on_the_split(attempt, tmp_path, batch_lines):
    whole, split = Lake(str(tmp_path / "whole")), Lake(str(tmp_path / "split"))
    land_attempt(attempt, whole, load_patterns())
    land_attempt(attempt, split, load_patterns(), LandingSettings(batch_lines=batch_lines, batch_bytes=1 << 20))
    for table in ("progress", "events", "logs"):
        assert_frame_equal(landed(whole, attempt, table), landed(split, attempt, table))


def test_marker_iterations_are_those_extraction_gives_the_progress_events():
    """The summary reads markers with first_match (one column, no events built): over every line-catalog line and
    the lines above, the lines it finds and their iterations are those of extract_events' progress events."""
    import yaml

    from firstfault.transforms.extract import extract_events, first_match, lines_frame

    catalog = Path(__file__).parent / "catalog"
    lines = [line for path in sorted(catalog.glob("*.yaml")) for case in yaml.safe_load(path.read_text()) or [] for line in case["lines"]]
    lines += [megatron(T0, 10 * i, nan=i % 2) for i in range(20)]
    lines += ["successfully saved checkpoint from iteration     100 to /ckpt", "[Rank 0] step=100, skipped=0, lr=[0.1]",
              "iteration 7 started", "no marker here"]
    progress = [p for p in load_patterns() if p.kind == "progress"]
    frame = lines_frame(lines)
    events = extract_events(frame.lazy(), progress, assemblers=[], multiline_triggers=[]).collect()
    markers = first_match(frame, progress, "iteration")
    assert markers.select("line", "iteration").rows() == events.select("line", "iteration").rows()
    assert markers.height >= 23
