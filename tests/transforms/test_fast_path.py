"""The fast path (transforms/fixed_formats.py) gives every column of every line exactly as the general path does, and
reads nearly all lines of the benchmark shapes."""
import sys
from pathlib import Path

import fsspec
import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from firstfault import landing
from firstfault.config import LandingSettings
from firstfault.connectors.local_files import resolve_logs
from firstfault.connectors.static_context import context_from_dict, load_static_context
from firstfault.synthetic.simulate import read_truth, simulate
from firstfault.transforms.fixed_formats import FORMATS, detect_format, sample_lines, read_fixed_formats
from firstfault.transforms.lines import split_chunks, split_lines
from firstfault.transforms.messages import load_catalogue
from firstfault.transforms.normalize import normalize_lines

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import bench_attempt  # noqa: E402

CATALOG = Path(__file__).parents[1] / "catalog"
CTX = context_from_dict({"workload_id": "lines", "start": "2026-11-29T00:00:00Z", "end": "2026-11-29T23:59:59Z",
                         "nodes": ["gpu-001", "gpu-002"], "gpus_per_node": 8}, "<lines>", ".")
# lines at the edges of the shapes: those a shape reads (CR, U+FFFD and very long lines included) and those it
# leaves to the general path
READ = [
    "[Sun Nov  1 01:45:20 2026] mlx5_core 0000:5e:00.0: Link up",
    "[Sun Nov 29 01:45:20 2026]NVRM: Xid 79",
    "3: [2026-11-29 01:00:00] Iteration 5",
    "3: [2026-11-29 01:00:00] ",
    "3: [2026-11-29 01:00:00] gpu-1:12:13 [0] net.cc:1 NCCL WARN x",
    "3: gpu-1:12:13 [0] NCCL INFO x",
    "3: May:12:13 [0] NCCL INFO x",
    "3: [rank3]:[W1129 01:00:00.123456123 ProcessGroupNCCL.cpp:4561] [PG ID 0] using GPU 3",
    "3: [rank3]:[E1129 01:00:00.123456 a.cc:1]",
    "   7:  [2026-11-29 01:00:00] iteration 1 | padded",
    " " * 40 + "7: [2026-11-29 01:00:00] padded past the head fixed_positions.py reads",
    " " * 90 + "3: [rank3]:[E1129 01:00:00.123456 a.cc:1] padded past the head",
    "3: [rank3]:[E1129 01:00:00.123456123 " + "a" * 60 + ".cc:1] file name past the head",
    "3: [2026-02-30 01:00:00] no such day",
    "3: [2024-02-29 23:59:59] leap day",
    "1234567: [1999-12-31 00:00:00] digits: seven, μ",
    "Nov 29 01:00:00 gpu-001 kernel: [  259200.000000] EXT4-fs (nvme0n1p1): mounted",
    "Nov  1 01:00:00 gpu-001 kernel: [    1.5] audit: type=1400",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5]",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5]NVRM: no space",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5] Iteration",
    "Nov 29 01:00:00 a-very-long-host-name.example.com kernel: [1.5] past the head fixed_positions.py reads",
    "Nov 29 01:00:00 gpu-001 kernel: [12345678901234.56] digits: sixteen",
    "Feb 29 23:59:59 gpu-001 kernel: [0.000001] no such day this year",
    "Dec 31 23:59:59 gpu-001 kernel: [5.25] the year before",
    "3: [2026-11-29 01:00:00] iteration with a carriage return\r inside",
    "3: [2026-11-29 01:00:00] bad \ufffd byte",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5] mis-encoded \ufffd\ufffd",
    "3: [2026-11-29 01:00:00] " + "long " * 20_000,  # far longer than a piece reads at once
]
LEFT = [
    "[Sun Nov 29 01:45:20 2026] systemd[1]: Started", "[Sun Nov 1 01:45:20 2026] one space",
    "[Sun Nov 29 01:45:20 2026]  two spaces", "[Sun Nov 29 01:45:20 2026] [T12] caller tag",
    "[Mon Nov 29 01:45:20 26] short year", "[Sun Nov 29 01:45:20 2026] E1129 01:00:00.1 x",
    "3: [2026-11-29 01:00:00] error: *** JOB 1 ON x CANCELLED AT 2026-11-29T01:00:00 ***",
    "3: [2026-11-29 01:00:00] slurmstepd: error: *** STEP 1.0 ON x CANCELLED AT 2026-11-29T01:00:00 ***",
    "3: [2026-11-29 01:00:00]   time      : 2026-11-29_01:00:00",
    "3: [2026-11-29 01:00:00] E1129 01:00:00.123456 1 a.cc:1] glog after the stamp",
    "3: [2026-11-29 01:00:00] [E ProcessGroupNCCL.cpp:737] old torch form",
    "3: [2026-11-29 01:00:00] [rank3]: rank after the stamp",
    "3: [2026-11-29 01:00:00] E",
    "3: [2026-11-29 01:00:00]",
    "3: [2026-13-29 01:00:00] month 13",
    "3: [2026-02-30 24:00:00] hour 24",
    "3: [2026-11-29 01:00:00,123] with a fraction",
    "3: [2026-11-29 01:00:00] host:12 [0] NCCL INFO one field",
    "3: [2026-11-29 01:00:00] gpu-1:12:13 [0] NCCL",
    "3: 2gpu:12:13 [0] NCCL INFO x",
    "3: gpu-1:12:13 [12345] NCCL INFO x",
    "3: Nov 29 01:00:00 gpu-1:12:13 [0] NCCL INFO x",
    "3: [rank3]: [E321 02:07:08.408271 a.cpp:1]  time : 2026-01-01_00:00:00",
    "3: [rank3]:[E321 02:07:08.4082 a.cpp:1] four digits of fraction",
    "3: [rank3]:[E1129 01:00:00.123456 a.cc:1] error: x",
    "3: [rank3]:[E1129 01:00:00.123456 a.cc:1] h:1:2 [0] NCCL x",
    "3:",
    "3: ",
    "3:x",
    "12345678: eight digits",
    "Nov 1 01:00:00 gpu-001 kernel: [1.5] one space",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5] [T123] caller tag",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5]  two spaces",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5] systemd[1]: Started",
    "Nov 29 01:00:00 kernel: [1.5] no host",
    "Nov 29 01:00:00.123 gpu-001 kernel: [1.5] fraction",
    "Feb 30 25:00:00 gpu-001 kernel: [1.5] bad clock",
    "Nov 29 01:00:00 gpu-001 kernel: [+1.5] delta",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5] gpu:1:2 [0] NCCL INFO",
    "Nov 29 01:00:00 gpu-001 kernel: [1.5] W1129 01:00:00.1 x",
    "",
    " ",
    "\ufffd: x",
]


def _frame(raw: list[str], file_format: str | None) -> pl.DataFrame:
    """Lines of one file as `_split_and_normalize` hands them to `normalize_lines`."""
    return pl.DataFrame({"line": range(1, len(raw) + 1), "raw": raw}, schema={"line": pl.Int64, "raw": pl.String}).with_columns(
        _piece=pl.lit(0, pl.Int32), _file=pl.lit(0, pl.Int32), _attempt=pl.lit(0, pl.Int32), file_index=pl.lit(0, pl.Int32),
        source=pl.lit("applog"), uri=pl.lit("mem://lines"), _file_node=pl.lit(None, pl.String),
        _file_rank=pl.lit(None, pl.Int32), _label=pl.lit("rank"), _format=pl.lit(file_format, pl.String),
    )


def _catalog_lines() -> list[str]:
    """Every example line of the message catalogue and of the line catalog."""
    examples = [line for m in load_catalogue() for x in m.examples for line in x.lines]
    return examples + [line for path in sorted(CATALOG.glob("*.yaml")) for case in yaml.safe_load(path.read_text()) or []
                       for line in case["lines"]]


@pytest.mark.parametrize("file_format", sorted(FORMATS))
@pytest.mark.parametrize("lines", [_catalog_lines(), READ + LEFT], ids=["catalog", "edges"])
def test_every_line_read_as_any_format_normalises_as_the_general_path(lines, file_format):
    """Each line as if its file had each format: the shapes take only the lines they read exactly."""
    frame = _frame(lines, file_format)
    assert_frame_equal(normalize_lines([CTX], frame), normalize_lines([CTX], frame, fast=False))


@pytest.mark.parametrize("line", READ)
def test_a_line_alone_normalises_as_the_general_path(line):
    """A frame of one line: its text may be all of an Arrow buffer, shorter than the bytes a shape reads."""
    for file_format in FORMATS:
        frame = _frame([line], file_format)
        assert_frame_equal(normalize_lines([CTX], frame), normalize_lines([CTX], frame, fast=False))


def test_the_edge_lines_that_fit_a_shape_are_read_and_the_others_left():
    """Each edge line under each format: the ones of READ fit a shape of one of them, those of LEFT of none."""
    _, left = read_fixed_formats(pl.concat([_frame(READ + LEFT, f) for f in FORMATS]).with_row_index("_row"))
    assert sorted(left["raw"]) == sorted(LEFT * len(FORMATS) + READ * (len(FORMATS) - 1))


@pytest.mark.parametrize("lines, expected", [
    (["   7:  [2026-11-29 01:00:00] iteration 1"] * 3 + ["plain"] * 2, "srun"),
    (["Nov 29 01:00:00 gpu-001 kernel: [1.5] x", "", "", "plain"], "syslog_kernel"),
    (["[Sun Nov 29 01:45:20 2026] x", "plain"], "dmesg_t"),
    (["plain", "plain", "3: [2026-11-29 01:00:00] x"], None),
    ([], None),
])
def test_a_file_has_the_format_most_of_its_first_lines_fit(lines, expected):
    assert detect_format(lines) == expected


def test_a_file_that_changes_shape_after_its_first_lines_falls_back_line_by_line():
    lines = ["3: [2026-11-29 01:00:00] iteration 1"] * 10 + ["Nov 29 01:00:00 gpu-001 kernel: [1.5] x", "other"]
    assert detect_format(sample_lines("\n".join(lines).encode())) == "srun"
    frame = _frame(lines, "srun")
    read, rest = read_fixed_formats(frame.with_row_index("_row"))
    assert (read.height, rest["raw"].to_list()) == (10, lines[10:])
    assert_frame_equal(normalize_lines([CTX], frame), normalize_lines([CTX], frame, fast=False))


def _landed(specs: list[Path], fast: bool) -> pl.DataFrame:
    """Every line of the attempts as landing splits and normalises them, in small units (several pieces per file)."""
    ctxs = [load_static_context(str(s)) for s in specs]
    files = [(p, i, f) for p, ctx in enumerate(ctxs) for i, f in enumerate(resolve_logs(ctx)[0])]
    settings = LandingSettings(batch_bytes=1 << 20)
    frames = []
    for unit in landing._units(files, settings):
        pieces = [(position, piece) for position, piece in enumerate(unit) if piece.chunk]
        lines, _ = split_chunks([p.chunk for _, p in pieces], [p.first_line for _, p in pieces], settings.max_line_bytes)
        frame = lines.join(landing._file_columns(files, pieces), on="_chunk", how="left", maintain_order="left").drop("_chunk")
        frames.append(normalize_lines(ctxs, frame, fast=fast))
    return pl.concat(frames)


def _fast_share(specs: list[Path]) -> float:
    """The share of the attempts' lines the fast path reads."""
    read = total = 0
    for spec in specs:
        for log_file in resolve_logs(load_static_context(str(spec)))[0]:
            with fsspec.open(log_file.uri, "rb") as f:
                data = f.read()
            lines, _ = split_lines(data, 1, 1 << 16)
            fast, rest = read_fixed_formats(_frame(lines["raw"].to_list(), detect_format(sample_lines(data))).with_row_index("_row"))
            read, total = read + fast.height, total + fast.height + rest.height
    return read / total


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> list[Path]:
    """A small fleet padded like the nightly benchmark's (bench_fleet.py): mostly benign training chatter."""
    root = tmp_path_factory.mktemp("fleet")
    simulate(root, nodes=16, attempts=40, days=1, seed=1, pad_bytes=100_000, max_job_nodes=8)
    return [root / t["spec"] for t in read_truth(root)]


@pytest.fixture(scope="module")
def long_attempt(tmp_path_factory) -> list[Path]:
    """bench_attempt.py's attempt, small."""
    return [bench_attempt.generate(tmp_path_factory.mktemp("attempt"), 2, 0.77)]


def test_landing_detects_each_files_format_once_and_gives_it_to_every_piece(long_attempt):
    ctx = load_static_context(str(long_attempt[0]))
    files = [(0, i, f) for i, f in enumerate(resolve_logs(ctx)[0])]
    pieces = [piece for unit in landing._units(files, LandingSettings(batch_bytes=1 << 20)) for piece in unit]
    assert len(pieces) > len(files)
    assert {(piece.file.source, piece.format) for piece in pieces} == {("applog", "srun"), ("syslog", "syslog_kernel")}


@pytest.mark.parametrize("attempts", ["fleet", "long_attempt"])
def test_landed_lines_are_those_of_the_general_path(attempts, request):
    specs = request.getfixturevalue(attempts)
    assert_frame_equal(_landed(specs, fast=True), _landed(specs, fast=False))


@pytest.mark.parametrize("attempts", ["fleet", "long_attempt"])
def test_the_fast_path_reads_nearly_every_line_of_the_benchmarks(attempts, request):
    share = _fast_share(request.getfixturevalue(attempts))
    print(f"fast path share of the {attempts}'s lines: {share:.4f}")
    assert share >= 0.99
