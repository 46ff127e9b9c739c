"""Garbage bytes in a text log (a crash's junk, a half-written block) cost only their own lines: every readable line
of the log lands, the junk lines are counted in `lines_skipped`, and the verdict is the one without the junk. The
demo's headline attempt (an Xid 149 in node-02's kernel log, NCCL errors in the training log) carries the junk."""
from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.lake import Lake
from firstfault.run import attribute, land
from firstfault.synthetic.demo import write_demo

LOGS = ("kernel/node-02.log", "app/train.log")  # the root's and the symptoms' files
VERDICT = ("verdict", "domain", "subdomain", "culprit_nodes")


@pytest.fixture(scope="module")
def headline(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo(root)
    return root / "attempts" / "headline"


def junk(size: int, seed: int, line_bytes: int) -> bytes:
    """`size` bytes of binary garbage (NUL and control bytes, invalid UTF-8, some text), a newline every
    `line_bytes` bytes or so."""
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(size))
    for at in range(rng.randrange(line_bytes), size, line_bytes):
        data[at] = 10
    return bytes(data)


def with_junk(folder: Path, dest: Path, blocks: dict[str, list[tuple[float, bytes]]]) -> Path:
    """A copy of the attempt in `folder` with each block of junk inserted before the line at that fraction of its
    file (0: its start), ended by a newline."""
    shutil.copytree(folder, dest)
    for name, inserts in blocks.items():
        path = dest / name
        lines = path.read_bytes().splitlines(keepends=True)
        for fraction, block in sorted(inserts, reverse=True):
            at = int(fraction * len(lines))
            lines.insert(at, block + b"\n")
        path.write_bytes(b"".join(lines))
    return dest


def attributed(folder: Path, work: Path) -> tuple[dict, dict[str, list[str]], dict[str, dict]]:
    """The attempt's verdict, the lines landed of each of its files and each file's connector report."""
    ctx = load_static_context(str(folder / "attempt.yaml"))
    config = Config(lake=LakeSettings(str(work / "lake")), warehouse=WarehouseSettings(str(work / "w.duckdb")))
    (landed,) = land([ctx], config)
    (row,) = attribute([ctx], config).tables["attributions"].to_pylist()
    logs = Lake(str(work / "lake")).read("logs", ctx.day, ctx.attempt_key)
    lines = {name: logs.filter(pc.ends_with(logs["uri"], name)).column("raw").to_pylist() for name in LOGS}
    reports = {name: next(r for r in landed.reports if r["uri"].endswith(name)) for name in LOGS}
    return {k: row[k] for k in VERDICT}, lines, reports


@pytest.fixture(scope="module")
def without_junk(headline, tmp_path_factory) -> dict:
    verdict, lines, _ = attributed(headline, tmp_path_factory.mktemp("base"))
    assert verdict["verdict"] == "attributed" and verdict["culprit_nodes"] == ["node-02"]
    return {"verdict": verdict, "lines": lines}


def assert_junk_costs_only_its_lines(headline, without_junk, dest: Path, blocks) -> dict[str, dict]:
    verdict, lines, reports = attributed(with_junk(headline, dest / "attempt", blocks), dest)
    assert verdict == without_junk["verdict"]
    for name in LOGS:
        lost = Counter((headline / name).read_text().splitlines()) - Counter(lines[name])  # each line as often as written
        assert not lost, (name, lost)
        assert reports[name]["status"] == "ok" and reports[name]["rows"] == len(lines[name])
    return reports


@pytest.mark.parametrize("fraction", [0.0, 0.5], ids=["at the start", "in the middle"])
def test_4_kib_of_binary_in_a_log_drops_only_its_lines(headline, without_junk, tmp_path, fraction):
    block = b"\x00\x01\x02\xff\xfe\x1b[0m\x7f\x10\x11" * 410  # NULs, control bytes, invalid UTF-8: one line of ~4 KiB
    reports = assert_junk_costs_only_its_lines(headline, without_junk, tmp_path, {name: [(fraction, block)] for name in LOGS})
    for name in LOGS:
        assert (reports[name]["lines_skipped"], reports[name]["lines_binary"]) == (1, 0)
        assert reports[name]["reason"] == "skipped lines 1"


JUNK = st.tuples(st.sampled_from(LOGS), st.floats(0, 1), st.integers(1, 64 << 10), st.integers(0, 2**32),
                 st.sampled_from([1, 8, 80, 4096, 1 << 17]))


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(JUNK, min_size=1, max_size=3))
def test_random_junk_blocks_cost_only_their_lines(headline, without_junk, tmp_path_factory, blocks):
    inserts: dict[str, list] = {}
    for name, fraction, size, seed, line_bytes in blocks:
        inserts.setdefault(name, []).append((fraction, junk(size, seed, line_bytes)))
    assert_junk_costs_only_its_lines(headline, without_junk, tmp_path_factory.mktemp("junk"), inserts)
