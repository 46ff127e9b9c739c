"""Attempts landed together (one pass, shared units of lines) give each attempt exactly what landing it alone gives:
its own time zone, window, nodes, rank map and per-file clocks."""
import polars as pl

from firstfault.config import Config, LakeSettings, LandingSettings, WarehouseSettings
from firstfault.lake import Lake
from firstfault.connectors.static_context import context_from_dict
from firstfault.landing import land_attempt, land_attempts
from firstfault.run import attribute
from firstfault.transforms.extract import load_patterns

APPLOG = [
    "0: [rank0]:[E1129 01:40:05.000000 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout",
    "1: node-b:11:12 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.2<0>",
    "[2026-11-29 01:41:00,000] [INFO] iteration      100/    1000 | loss 2.0",
    "no stamp here",
]
KERNEL = [
    "Nov 29 01:39:00 node-b kernel: [  100.000000] NVRM: GPU at PCI:0000:2b:00",
    "[  150.500000] NVRM: Xid (PCI:0000:2b:00): 79, pid=1, GPU has fallen off the bus.",
    "Nov 29 01:50:00 node-b kernel: [    5.000000] after a reboot",
    "[    6.000000] NVRM: Xid (PCI:0000:2b:00): 48, pid=2, DBE",
]


def attempt(root, name: str, tz: str, nodes: list[str]):
    folder = root / name
    (folder / "k").mkdir(parents=True)
    (folder / "app.log").write_text("\n".join(APPLOG) + "\n")
    (folder / "k" / f"{nodes[-1]}.log").write_text("\n".join(KERNEL) + "\n")
    doc = {"workload_id": name, "start": "2026-11-29T00:30:00Z", "end": "2026-11-29T08:00:00Z", "timezone": tz,
           "nodes": nodes, "gpus_per_node": 1,
           "logs": [{"source": "applog", "path": "app.log"}, {"source": "syslog", "path": "k/{node}.log"}]}
    return context_from_dict(doc, str(folder / "attempt.yaml"), str(folder))


def landed(lake: Lake, ctx, table: str) -> list[dict]:
    frame = pl.from_arrow(lake.read(table, ctx.day, ctx.attempt_key))
    return frame.drop([c for c in ("day", "attempt_key") if c in frame.columns]).to_dicts()


def test_attempts_landed_together_match_each_landed_alone(tmp_path):
    ctxs = [attempt(tmp_path, "utc", "UTC", ["node-a", "node-b"]),
            attempt(tmp_path, "east", "America/New_York", ["node-x", "node-b"]),
            attempt(tmp_path, "berlin", "Europe/Berlin", ["node-b"])]
    patterns = load_patterns()
    settings = LandingSettings(batch_bytes=256)  # several units, some spanning attempts and time zones
    together, alone = Lake(str(tmp_path / "together")), Lake(str(tmp_path / "alone"))
    land_attempts(ctxs, together, patterns, settings)
    for ctx in ctxs:
        land_attempt(ctx, alone, patterns, settings)
    for ctx in ctxs:
        for table in ("logs", "events", "progress", "context", "connector_reports"):
            assert landed(together, ctx, table) == landed(alone, ctx, table), (ctx.workload_id, table)
    logs = {ctx.workload_id: landed(together, ctx, "logs") for ctx in ctxs}
    # the same local stamp is a different instant in each attempt's zone; the kernel's boots anchor per file
    assert [rows[2]["ts"].hour for rows in (logs["utc"], logs["east"], logs["berlin"])] == [1, 6, 0]
    assert [r["ts_quality"] for r in logs["utc"][4:]] == ["year_inferred", "boot_anchored", "year_inferred", "boot_anchored"]
    # each attempt's own rank map (rank 0 is its first node) and node list
    assert [[r["node"] for r in logs[name][:2]] for name in ("utc", "east", "berlin")] == [
        ["node-a", "node-b"], ["node-x", "node-b"], ["node-b", "node-b"]]


def test_a_unit_whose_lines_are_all_dropped_lands_empty(tmp_path):
    (tmp_path / "app.log").write_bytes(b"\x01\x02\x03\n")  # binary: skipped
    ctx = context_from_dict({"workload_id": "nul", "start": "2026-11-29T01:00:00Z", "nodes": ["node-01"],
                             "logs": [{"source": "applog", "path": "app.log"}]}, str(tmp_path / "attempt.yaml"), str(tmp_path))
    lake = Lake(str(tmp_path / "lake"))
    result = land_attempt(ctx, lake, load_patterns())
    assert result.log_rows == 0 and lake.read("logs", ctx.day, ctx.attempt_key) is None
    assert [(r["status"], r["lines_skipped"]) for r in result.reports] == [("skipped", 1)]


def test_attempts_landed_by_worker_processes_match_those_landed_together(tmp_path):
    from firstfault.config import Config, LakeSettings
    from firstfault.run import land

    ctxs = [attempt(tmp_path, "utc", "UTC", ["node-a", "node-b"]), attempt(tmp_path, "berlin", "Europe/Berlin", ["node-b"])]
    lakes = {}
    for name, settings in (("workers", LandingSettings(workers=2)), ("together", LandingSettings())):
        config = Config(lake=LakeSettings(root=str(tmp_path / name)), landing=settings)
        results = land(ctxs, config)
        assert sorted(r.attempt_id for r in results) == sorted(c.attempt_id for c in ctxs)
        lakes[name] = Lake(str(tmp_path / name))
    for ctx in ctxs:
        for table in ("logs", "events", "progress", "context"):
            assert landed(lakes["workers"], ctx, table) == landed(lakes["together"], ctx, table), (ctx.attempt_id, table)


def test_attempts_extracted_in_groups_match_those_extracted_together(tmp_path, monkeypatch):
    """Attempts landed together are extracted in groups bounded by their candidate bytes: one attempt per group
    gives the rows of one group for all."""
    from firstfault import landing

    ctxs = [attempt(tmp_path, "utc", "UTC", ["node-a", "node-b"]), attempt(tmp_path, "berlin", "Europe/Berlin", ["node-b"])]
    one_group, groups = Lake(str(tmp_path / "one")), Lake(str(tmp_path / "groups"))
    land_attempts(ctxs, one_group, load_patterns())
    monkeypatch.setattr(landing, "_EXTRACT_GROUP_BYTES", 1)
    assert [len(g) for g in landing._extraction_groups(
        [landing._LogsLanded(c, "g", landing.LandingResult(c.attempt_id), [], _candidates(100)) for c in ctxs])] == [1, 1]
    land_attempts(ctxs, groups, load_patterns())
    for ctx in ctxs:
        for table in ("events", "progress", "connector_reports"):
            assert landed(one_group, ctx, table) == landed(groups, ctx, table), (ctx.attempt_id, table)


def _candidates(rows: int):
    from firstfault.schema import LINE_SCHEMA
    from firstfault.spill import SpillingFrames

    frames = SpillingFrames(LINE_SCHEMA, 1 << 20)
    frames.add(pl.DataFrame({"raw": ["x"] * rows}).with_columns(*[pl.lit(None, t).alias(c) for c, t in LINE_SCHEMA.items() if c != "raw"]))
    return frames


def test_kept_tables_are_what_the_lake_holds_and_the_rule_pass_reads_them_alike(tmp_path):
    """With `keep_bytes` each result holds the rule pass's input tables as written; over the budget none does."""
    ctxs = [attempt(tmp_path, "utc", "UTC", ["node-a", "node-b"]), attempt(tmp_path, "berlin", "Europe/Berlin", ["node-b"])]
    config = Config(lake=LakeSettings(root=str(tmp_path / "lake")), warehouse=WarehouseSettings(path=str(tmp_path / "wh.duckdb")))
    lake = Lake(config.lake.root)
    results = land_attempts(ctxs, lake, load_patterns(), keep_bytes=64 << 20)
    tables = {r.attempt_id: r.tables for r in results}
    for ctx in ctxs:
        assert sorted(tables[ctx.attempt_id]) == sorted(["events", "progress", "context", "connector_reports", "metrics", "flight_recorder"])
        for name, table in tables[ctx.attempt_id].items():
            assert pl.from_arrow(table).to_dicts() == landed(lake, ctx, name), name
    from_memory, from_lake = attribute(ctxs, config, landed=tables).tables, attribute(ctxs, config).tables
    assert from_memory.keys() == from_lake.keys()
    for name in from_lake:
        assert from_memory[name].equals(from_lake[name]), name
    assert all(not r.tables for r in land_attempts(ctxs, lake, load_patterns(), keep_bytes=1))
    assert all(not r.tables for r in land_attempts(ctxs, lake, load_patterns()))
