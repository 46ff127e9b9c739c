"""A big application log is landed in parts by several processes (`[landing] part_bytes`): the rows are those of
the file landed whole, for any number of parts; the parts' clocks start where the lines before them end."""
from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from firstfault.config import LandingSettings
from firstfault.connectors.local_files import resolve_logs, split_file
from firstfault.lake import Lake
from firstfault.landing import land_attempts
from firstfault.transforms.extract import load_patterns
from test_progress_summary import write_attempt


def landed(lake: Lake, ctx, table: str) -> pl.DataFrame:
    frame = pl.from_arrow(lake.read(table, ctx.day, ctx.attempt_key))
    frame = frame.drop([c for c in ("day", "attempt_key") if c in frame.columns])
    order = {"logs": ["uri", "line"], "events": ["event_id"], "connector_reports": ["uri"]}.get(table)
    return frame.sort(order) if order else frame


@pytest.fixture(scope="module")
def attempt(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    ctx = write_attempt(root)
    with open(root / "app.log", "a") as f:  # a Python traceback after the last stamp: a block for extraction
        f.write("0: Traceback (most recent call last):\n0:   File \"train.py\", line 7, in <module>\n"
                "0: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    return ctx


@pytest.mark.parametrize("workers,part_kb", [(2, 100), (3, 60), (4, 40)])
def test_a_file_landed_in_parts_gives_the_rows_of_the_file_landed_whole(attempt, tmp_path, workers, part_kb):
    whole, parts = Lake(str(tmp_path / "whole")), Lake(str(tmp_path / "parts"))
    land_attempts([attempt], whole, load_patterns())
    settings = LandingSettings(part_bytes=part_kb * 1024, batch_bytes=64 * 1024)
    assert len(split_file(_app_log(attempt), workers)) == workers
    land_attempts([attempt], parts, load_patterns(), settings, part_workers=workers)
    assert len(parts.files("logs", attempt.day, attempt.attempt_key)) > 1
    for table in ("logs", "events", "progress", "connector_reports"):
        assert_frame_equal(landed(whole, attempt, table), landed(parts, attempt, table))
    logs = landed(parts, attempt, "logs")
    assert logs.get_column("line").to_list() == list(range(1, logs.height + 1))
    assert logs.filter(pl.col("ts_quality") == "inherited").height > 200  # chatter lines, some at the start of a part


def _app_log(ctx) -> str:
    return resolve_logs(ctx)[0][0].uri


def test_a_file_whose_lines_need_a_boot_clock_is_landed_whole(tmp_path):
    """A line stamped in seconds since boot takes its wall time from a boot time the whole file tells: parts of such
    a file cannot be landed apart, so it is landed whole (the rows are the same)."""
    (tmp_path / "input").mkdir()
    ctx = write_attempt(tmp_path / "input")
    app = tmp_path / "input" / "app.log"
    lines = app.read_text().splitlines()
    lines.insert(len(lines) * 3 // 4, "0: [  100.500000] a line stamped in seconds since boot")
    app.write_text("\n".join(lines) + "\n")
    whole, parts = Lake(str(tmp_path / "whole")), Lake(str(tmp_path / "parts"))
    land_attempts([ctx], whole, load_patterns())
    land_attempts([ctx], parts, load_patterns(), LandingSettings(part_bytes=60 * 1024, batch_bytes=64 * 1024), part_workers=3)
    assert len(parts.files("logs", ctx.day, ctx.attempt_key)) == 1
    for table in ("logs", "events", "progress", "connector_reports"):
        assert_frame_equal(landed(whole, ctx, table), landed(parts, ctx, table))
