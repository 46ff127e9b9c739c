"""A flight-recorder pickle of a few MB that references one entry millions of times (or one list in every entry)
lands the latest entries only, reports what it skipped, and stays within a fixed memory bound."""
import json
import pickle
import subprocess
import sys

from firstfault.connectors.flight_recorder import MAX_ENTRIES

PEAK_RSS_BOUND_MB = 1500
ENTRY = {"process_group": ["0", "default"], "pg_id": 0, "collective_seq_id": 1, "profiling_name": "nccl:all_reduce",
         "state": "completed", "time_created_ns": 1_764_378_000_000_000_000, "input_sizes": [[1024]],
         "output_sizes": [[1024]], "is_p2p": False}
RUN = """
import resource, sys
from firstfault.cli import main
code = main(sys.argv[1:])
print("PEAK_MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
sys.exit(code)
"""


def test_a_pickle_bomb_is_bounded_and_reported(tmp_path):
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "_dump_0").write_bytes(pickle.dumps({"rank": 0, "entries": [ENTRY] * 4_000_000}))
    wide = dict(ENTRY, input_sizes=[[1] * 1000] * 100_000)  # 100 M numbers as JSON text, from 200 KB
    (tmp_path / "fr" / "_dump_1").write_bytes(pickle.dumps({"rank": 1, "entries": [wide] * 100}))
    spec = tmp_path / "attempt.json"
    spec.write_text(json.dumps({"workload_id": "bomb", "start": "2026-11-29T01:00:00Z", "nodes": ["n1"],
                                "flight_recorder": ["fr/_dump_*"]}))
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    done = subprocess.run([sys.executable, "-c", RUN, "attribute", "--static", str(spec), *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.split("PEAK_MB")[1])
    assert peak < PEAK_RSS_BOUND_MB, f"peak RSS {peak} MB"
    report = subprocess.run([sys.executable, "-m", "firstfault.cli", "sql", *args, "--format", "json",
                             "SELECT uri, status, rows, reason FROM connector_reports WHERE uri LIKE '%_dump_%' ORDER BY uri"],
                            capture_output=True, text=True, timeout=120)
    rows = [json.loads(line) for line in report.stdout.splitlines()]
    assert [(r["status"], r["rows"]) for r in rows] == [("ok", MAX_ENTRIES), ("ok", 100)]
    assert rows[0]["reason"] == f"{4_000_000 - MAX_ENTRIES} older entries skipped: more than {MAX_ENTRIES} in one dump"
