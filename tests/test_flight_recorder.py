"""Flight-recorder dump loader: real dumps load; malicious, truncated and non-pickle input is refused, never run."""
import os
import pickle
from pathlib import Path

import pytest

from firstfault.connectors.flight_recorder import load_dump, read_dumps
from firstfault.transforms.flight_recorder_events import flight_recorder_events
from firstfault.connectors.static_context import context_from_dict

FIXTURES = Path(__file__).parents[1] / "rules_sql" / "flight_recorder_dumps"  # shipped with the fixtures that read them


def _ctx(tmp_path=None):
    return context_from_dict({"workload_id": "fr", "start": "2025-09-22T00:00:00Z", "end": "2025-09-23T12:00:00Z",
                              "nodes": ["node-01", "node-02", "node-03", "node-04"], "gpus_per_node": 4}, "<test>", str(tmp_path or "."))


def _dumps(case):
    return sorted(str(p) for p in (FIXTURES / case).glob("_dump_*"))


@pytest.mark.parametrize("case, empty", [("lock_gil_1st", {9, 14}), ("gpu_error_1st", set())])
def test_real_dumps_load_one_row_per_entry(case, empty):
    frame, reports = read_dumps(_dumps(case), _ctx())
    assert len(reports) == 16
    assert {r["rank"] for r in reports} == set(range(16))
    assert {r["rank"] for r in reports if r["status"] == "empty"} == empty
    assert all(r["status"] in ("ok", "empty") for r in reports)
    assert frame.height == sum(r["rows"] for r in reports) > 0
    row = frame.row(0, named=True)
    assert row["source"] == "flight_recorder" and row["entry"] == 0 and row["op"].startswith("nccl:")
    assert row["pg_name"] and row["pg_desc"] and row["state"] and row["time_created_ns"] > 0
    assert '"entry": 0' in row["locator"]
    ctx = _ctx()
    events = flight_recorder_events(frame, reports, ctx.attempt_id, ctx.rank_map())
    assert set(events["kind"]) == {"flight_recorder_dump", "flight_recorder_entry"}
    assert events["event_id"].n_unique() == events.height
    assert events.filter(events["kind"] == "flight_recorder_dump").height == 16


class _Evil:
    def __reduce__(self):
        return (os.system, ('touch "${TMPDIR:-/tmp}/pwned_firstfault_fr"',))  # the marker of a pickle that ran


def test_a_pickle_that_calls_a_function_is_refused_not_run(tmp_path):
    marker = Path(os.environ.get("TMPDIR", "/tmp"), "pwned_firstfault_fr")  # where _Evil would touch it
    marker.unlink(missing_ok=True)
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        bad = tmp_path / f"_dump_{protocol}"
        bad.write_bytes(pickle.dumps({"entries": [_Evil()]}, protocol=protocol))
        frame, reports = read_dumps([str(bad)], _ctx(tmp_path))
        assert frame.height == 0
        assert reports[0]["status"] == "error"
        assert reports[0]["reason"].startswith("refused: pickle references a global"), reports[0]["reason"]
    assert not marker.exists()


def test_a_class_reference_is_refused_even_without_a_call():
    with pytest.raises(pickle.UnpicklingError, match="refused"):
        load_dump(pickle.dumps({"entries": [], "x": Path}))


def test_truncated_and_garbage_files_are_reported_as_not_a_dump(tmp_path):
    good = Path(_dumps("gpu_error_1st")[0]).read_bytes()
    cases = {"_dump_1": good[: len(good) // 2], "_dump_2": b"this is not a pickle\n" * 10, "_dump_3": b"",
             "_dump_4": pickle.dumps([1, 2, 3]), "_dump_5": os.urandom(512)}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    frame, reports = read_dumps(sorted(str(tmp_path / n) for n in cases), _ctx(tmp_path))
    assert frame.height == 0
    for r in reports:
        assert r["status"] == "error" and (r["reason"].startswith("not a dump") or r["reason"].startswith("refused")), r


def test_landing_writes_the_table_and_reports(tmp_path):
    from firstfault.config import Config, LakeSettings, WarehouseSettings
    from firstfault.run import attribute, land

    bad = tmp_path / "dumps" / "_dump_99"
    bad.parent.mkdir()
    bad.write_bytes(pickle.dumps(_Evil()))
    ctx = context_from_dict({"workload_id": "fr-land", "start": "2025-09-22T00:00:00Z", "end": "2025-09-23T12:00:00Z",
                             "state": "FAILED", "nodes": ["node-01", "node-02", "node-03", "node-04"], "gpus_per_node": 4,
                             "flight_recorder": [str(FIXTURES / "gpu_error_1st" / "_dump_*"), "dumps/_dump_*", "nowhere/_dump_*"]},
                            "<test>", str(tmp_path))
    config = Config(lake=LakeSettings(str(tmp_path / "lake")), warehouse=WarehouseSettings(str(tmp_path / "w.duckdb")))
    land([ctx], config)
    result = attribute([ctx], config)
    verdict = result.tables["attributions"].to_pylist()[0]
    assert verdict["culprit_ranks"] == [12]
    assert verdict["evidence"][0]["source"] == "flight_recorder"
    reports = {r["uri"].rsplit("/", 1)[-1]: r for r in verdict["connector_reports"] if r["connector"] == "flight_recorder"}
    assert reports["_dump_99"]["status"] == "error" and reports["_dump_99"]["reason"].startswith("refused")
    assert reports["_dump_*"]["status"] == "missing"
    assert sum(r["status"] == "ok" for r in reports.values()) == 16



def test_a_dump_repeating_one_entry_by_reference_is_read_by_its_newest_entries(tmp_path, monkeypatch):
    import firstfault.connectors.flight_recorder as flight_recorder

    monkeypatch.setattr(flight_recorder, "MAX_ENTRIES", 1000)
    entry = {"collective_seq_id": 7, "profiling_name": "nccl:all_reduce", "state": "scheduled", "time_created_ns": 1}
    path = tmp_path / "_dump_3"
    path.write_bytes(pickle.dumps({"entries": [entry] * 50_000, "pg_config": {}}))  # one dict, 50,000 references
    frame, [report] = read_dumps([str(path)], _ctx(tmp_path))
    assert frame.height == report["rows"] == 1000 and report["status"] == "ok"
    assert report["reason"] == "49000 older entries skipped: more than 1000 in one dump"
    assert frame["entry"].min() == 49_000
