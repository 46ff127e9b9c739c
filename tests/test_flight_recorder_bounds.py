"""A flight-recorder pickle of a few MB that references one entry a million times (or one list in every entry)
lands the latest entries only, reports what it skipped, and stays within a fixed memory bound."""
import json
import pickle
import subprocess
import sys

import pytest

from firstfault.connectors.flight_recorder import MAX_ENTRIES

PEAK_RSS_BOUND_MB = 1500
ENTRY = {"process_group": ["0", "default"], "pg_id": 0, "collective_seq_id": 1, "profiling_name": "nccl:all_reduce",
         "state": "completed", "time_created_ns": 1_764_378_000_000_000_000, "input_sizes": [[1024]],
         "output_sizes": [[1024]], "is_p2p": False}
# The peak of the attempt's own process, reported by a small wrapper that started it: a process started by pytest
# itself would count pytest's memory at the fork in its own peak.
RUN = """
import resource, subprocess, sys
code = subprocess.run([sys.executable, "-m", "firstfault.cli", *sys.argv[1:]]).returncode
print("PEAK_MB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
sys.exit(code)
"""


def attribute_dumps(tmp_path, dumps: dict[str, bytes]) -> list[dict]:
    """Attribute an attempt with these flight-recorder dumps in a process of bounded peak memory that exits 0; the
    dumps' connector reports."""
    (tmp_path / "fr").mkdir()
    for name, data in dumps.items():
        (tmp_path / "fr" / name).write_bytes(data)
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({"workload_id": "bomb", "start": "2026-11-29T01:00:00Z", "nodes": ["n1"],
                                "flight_recorder": ["fr/_dump_*"]}))
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    done = subprocess.run([sys.executable, "-c", RUN, "attribute", "--static", str(spec), *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    peak = int(done.stdout.split("PEAK_MB")[1])
    assert peak < PEAK_RSS_BOUND_MB, f"peak RSS {peak} MB"
    report = subprocess.run([sys.executable, "-m", "firstfault.cli", "sql", *args, "--format", "json",
                             "SELECT uri, status, rows, reason FROM connector_reports WHERE uri LIKE '%_dump_%' ORDER BY uri"],
                            capture_output=True, text=True, timeout=120)
    return [json.loads(line) for line in report.stdout.splitlines()]


def test_a_pickle_bomb_is_bounded_and_reported(tmp_path):
    wide = dict(ENTRY, input_sizes=[[1] * 1000] * 100_000)  # 100 M numbers as JSON text, from 200 KB
    rows = attribute_dumps(tmp_path, {"_dump_0": pickle.dumps({"rank": 0, "entries": [ENTRY] * 1_000_000}),
                                      "_dump_1": pickle.dumps({"rank": 1, "entries": [wide] * 100})})
    assert [(r["status"], r["rows"]) for r in rows] == [("ok", MAX_ENTRIES), ("ok", 100)]
    assert rows[0]["reason"] == f"{1_000_000 - MAX_ENTRIES} older entries skipped: more than {MAX_ENTRIES} in one dump"


# --- dumps that multiply as they are read: every shape of issue 20 finding 2 -------------------------------------------

def fan_out(levels: int, width: int = 10):
    """width**levels leaves from a few hundred bytes of pickle: every level repeats one reference."""
    value = "leaf"
    for _ in range(levels):
        value = [value] * width
    return value


def _text(s: str) -> bytes:
    data = s.encode()
    return b"X" + len(data).to_bytes(4, "little") + data  # BINUNICODE


def nested_dump(depth: int) -> bytes:
    """An entry whose fields are lists (and tuples) nested `depth` deep: written opcode by opcode, since pickle.dumps
    itself recurses."""
    lists = b"]" * depth + b"a" * (depth - 1)          # EMPTY_LIST x depth, then APPEND each into the one before
    tuples = b"N" + b"\x85" * depth                   # NONE, then TUPLE1 around it depth times
    entry = (b"}(" + _text("profiling_name") + lists + _text("input_sizes") + lists + _text("process_group") + tuples
             + _text("state") + tuples + b"u")        # EMPTY_DICT, MARK, key/value pairs, SETITEMS
    return b"\x80\x02}(" + _text("rank") + b"K\x00" + _text("entries") + b"]" + entry + b"au."


def memo_reference_dump(references: int) -> bytes:
    """One entry, then `references` memo references to it (BINGET, two bytes each) in the entries list."""
    two = pickle.dumps({"rank": 0, "entries": [ENTRY, ENTRY]}, protocol=2)
    second = two.rindex(b"h\x04e")  # the second entry: a BINGET of the first, then APPENDS
    return two[:second] + b"h\x04" * references + two[second + 2 :]


SHARED_LEAVES = [7] * 10_000
SHAPES = {
    # one dump per field whose value fans out to 10**8 leaves from a few hundred bytes
    "fan-out": lambda: {f"_dump_{i}": pickle.dumps({"rank": i, "entries": [dict(ENTRY, **{field: fan_out(8)})]})
                for i, field in enumerate(("profiling_name", "state", "pg_id", "process_group"))}
    | {"_dump_4": pickle.dumps({"rank": 4, "entries": [ENTRY], "pg_config": {"0": {"desc": fan_out(8)}}, "version": fan_out(8)})},
    # 65,536 entries that share one list of 10**4 leaves
    "shared-list": lambda: {"_dump_0": pickle.dumps({"rank": 0, "entries": [dict(ENTRY, input_sizes=SHARED_LEAVES, output_sizes=SHARED_LEAVES)
                                                                   for _ in range(MAX_ENTRIES)]})},
    "nested": lambda: {"_dump_0": nested_dump(200_000)},
    "memo-references": lambda: {"_dump_0": memo_reference_dump(90_000_000)},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_dump_that_multiplies_is_read_within_bounds(tmp_path, shape):
    dumps = SHAPES[shape]()
    rows = attribute_dumps(tmp_path, dumps)
    assert len(rows) == len(dumps)
    if shape == "memo-references":
        assert rows[0]["status"] == "error" and "pickle operations" in rows[0]["reason"], rows
    else:
        assert all(r["status"] == "ok" for r in rows), rows
