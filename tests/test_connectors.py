"""Local files (globs, {node}, .gz, truncated/huge input), metrics CSV and the lake's replace-one-attempt writes."""
import gzip

import polars as pl
import pyarrow as pa

from firstfault.config import LandingSettings
from firstfault.lake import Lake
from firstfault.connectors.local_files import read_batches, resolve_logs
from firstfault.connectors.metrics_csv import read_metrics
from firstfault.connectors.static_context import context_from_dict
from firstfault import landing
from firstfault.landing import land_attempt
from firstfault.transforms.extract import load_patterns


def make_ctx(root, **extra):
    doc = {"workload_id": "w", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z", "nodes": ["node-01", "node-02"], **extra}
    return context_from_dict(doc, str(root / "attempt.yaml"), str(root))


def test_resolve_node_expansion_globs_and_missing(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "node-01.log").write_text("x\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "rank3.log").write_text("y\n")
    (tmp_path / "app" / "node-02-stdout.log").write_text("z\n")
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "k/{node}.log"}, {"source": "applog", "path": "app/*.log"}])
    files, missing = resolve_logs(ctx)
    by_name = {f.uri.rsplit("/", 1)[1]: f for f in files}
    assert by_name["node-01.log"].node == "node-01"
    assert by_name["rank3.log"].rank == 3 and by_name["rank3.log"].node is None
    assert by_name["node-02-stdout.log"].node == "node-02"
    assert [(m.source, m.pattern) for m in missing] == [("syslog", "k/node-02.log")]


def test_read_batches_gz_line_numbers_and_huge_line(tmp_path):
    path = tmp_path / "a.log.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"one\ntwo\n" + b"x" * 5000 + b"\nafter\n")
    chunks = list(read_batches(path.as_uri(), batch_bytes=64, max_line_bytes=100))
    text = b"".join(c for c, _, _ in chunks)
    assert text.split(b"\n")[0:2] == [b"one", b"two"] and b"after" in text
    starts = [first for _, first, _ in chunks]
    assert starts == sorted(starts) and sum(cut for _, _, cut in chunks) > 4000


def test_truncated_gz_is_reported_not_fatal(tmp_path):
    data = gzip.compress(b"Nov 29 01:10:00 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n" * 500)
    (tmp_path / "node-01.log.gz").write_bytes(data[: len(data) // 2])
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "*.log.gz"}])
    result = land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings())
    report = [r for r in result.reports if r["uri"].endswith(".gz")][0]
    assert report["status"] == "error" and "EOFError" in report["reason"]
    assert report["rows"] > 0 and result.event_rows > 0  # everything before the damage is kept


def test_metrics_csv_long_format_skips_bad_rows(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(
        "ts,node,metric,value,port\n"
        "2026-11-29T01:00:00Z,node-01,ib_link_downed,0,mlx5_0:1\n"
        "2026-11-29T01:01:00Z,node-01,ib_link_downed,3,mlx5_0:1\n"
        "garbage,node-01,ib_link_downed,x,\n"
    )
    frame, report = read_metrics(path.as_uri(), make_ctx(tmp_path))
    assert frame.height == 2 and frame["value"].to_list() == [0.0, 3.0] and frame["line"].to_list() == [2, 3]
    assert report.status == "ok" and "1 malformed" in report.reason
    bad, report = read_metrics((tmp_path / "none.csv").as_uri(), make_ctx(tmp_path))
    assert bad.height == 0 and report.status == "error"


def test_lake_write_replaces_one_partition_only(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    schema = pa.schema([("x", pa.int64())])
    lake.write("logs", "2026-11-29", "a~2F1", pa.table({"x": [1, 2, 3]}), schema)
    lake.write("logs", "2026-11-29", "a~2F2", pa.table({"x": [9]}), schema)
    lake.write("logs", "2026-11-29", "a~2F1", pa.table({"x": []}, schema=schema), schema)
    assert lake.read("logs", "2026-11-29", "a~2F1") is None  # no rows: no file
    assert lake.read("logs", "2026-11-29", "a~2F2").column("x").to_pylist() == [9]
    read = pl.scan_parquet(f"{tmp_path}/lake/logs/**/*.parquet", hive_schema={"day": pl.String, "attempt_key": pl.String}).collect()
    assert read["attempt_key"].to_list() == ["a~2F2"]


def test_srun_labelled_megatron_lines_and_dmesg_r_lines_carry_their_own_stamps(tmp_path):
    # Megatron's " [stamp] iteration …" after a padded srun label, and `dmesg -r` lines, used to inherit the file's
    # first stamp (a job that trained until its time limit then looked like a hang)
    (tmp_path / "train.log").write_text("".join(
        f"23:  [2026-11-29 01:{m:02d}:08] iteration {m:>8}/  250000 | consumed samples: {m * 1024:>12} | lm loss: 2.5E+00 |\n"
        for m in range(10, 13)))
    (tmp_path / "node-01.dmesg").write_text("<6>[  100.000000] first\n<0>[  160.500000] Kernel panic - not syncing: hung_task: blocked tasks\n")
    ctx = make_ctx(tmp_path, logs=[{"source": "applog", "path": "train.log"}, {"source": "dmesg", "path": "{node}.dmesg"}],
                   boot_times={"node-01": "2026-11-29T00:58:20Z"})
    lake = Lake(str(tmp_path / "lake"))
    land_attempt(ctx, lake, load_patterns(), LandingSettings())
    logs = pl.from_arrow(lake.read("logs", ctx.day, ctx.attempt_key)).sort("uri", "line")
    stamps = {(r["uri"].rsplit("/", 1)[1], r["line"]): r["ts"].isoformat() for r in logs.iter_rows(named=True)}
    assert [stamps[("train.log", n)] for n in (1, 2, 3)] == ["2026-11-29T01:10:08", "2026-11-29T01:11:08", "2026-11-29T01:12:08"]
    assert [stamps[("node-01.dmesg", n)] for n in (1, 2)] == ["2026-11-29T01:00:00", "2026-11-29T01:01:00.500000"]
    assert set(logs["rank"].drop_nulls()) == {23}


def test_a_kernel_log_with_stray_latin1_bytes_is_landed_not_skipped(tmp_path):
    # two of five lines end in a Latin-1 'é' (invalid UTF-8): the lines are repaired and counted, the file and its
    # fatal Xid are kept
    (tmp_path / "node-01.log").write_bytes(
        b"Nov 29 01:10:00 node-01 kernel: [  100.000000] usb 1-1: new device caf\xe9\n"
        b"Nov 29 01:10:01 node-01 kernel: [  101.000000] eth0: renamed from veth caf\xe9\n"
        b"Nov 29 01:10:02 node-01 kernel: [  102.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        b"Nov 29 01:10:03 node-01 kernel: [  103.000000] NVRM: GPU at PCI:0000:3b:00: GPU-7e3a\n"
        b"Nov 29 01:10:04 node-01 kernel: [  104.000000] audit: type=1400\n")
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "{node}.log"}])
    result = land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings())
    report = next(r for r in result.reports if r["uri"].endswith("node-01.log"))
    assert (report["status"], report["rows"], report["lines_malformed"]) == ("ok", 5, 2)
    assert result.event_rows >= 1  # the Xid


def test_read_batches_bounds_the_lines_of_a_chunk(tmp_path):
    data = b"\n" * 10 + b"a\nb\n"
    (tmp_path / "flood.log").write_bytes(data)
    chunks = list(read_batches((tmp_path / "flood.log").as_uri(), batch_bytes=1024, max_line_bytes=100, max_lines=5))
    assert [(c.count(b"\n"), first) for c, first, _ in chunks] == [(5, 1), (5, 6), (2, 11)]
    assert b"".join(c for c, _, _ in chunks) == data


def test_a_newline_flood_lands_in_units_of_bounded_lines_with_the_same_rows(tmp_path, monkeypatch):
    # 200 k empty lines around a fatal Xid: units are cut by lines too, and the rows do not depend on the cut
    (tmp_path / "node-01.log").write_bytes(
        b"\n" * 100_000 + b"Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
        + b"\n" * 100_000)
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "{node}.log"}])
    unit_lines: dict[str, list[int]] = {}
    units = landing._units

    def landed(name: str, settings: LandingSettings):
        unit_lines[name] = []
        monkeypatch.setattr(landing, "_units", lambda files, s: (unit_lines[name].append(sum(p.lines for p in u)) or u
                                                                 for u in units(files, s)))
        lake = Lake(str(tmp_path / name))
        result = land_attempt(ctx, lake, load_patterns(), settings)
        return pl.from_arrow(lake.read("logs", ctx.day, ctx.attempt_key)).sort("line").drop("uri"), result.event_rows

    by_lines, by_bytes = landed("lines", LandingSettings(batch_lines=20_000)), landed("bytes", LandingSettings())
    assert max(unit_lines["lines"]) <= 20_000 and len(unit_lines["lines"]) >= 10 and unit_lines["bytes"] == [200_001]
    assert by_lines[0].equals(by_bytes[0]) and by_lines[1] == by_bytes[1] == 1


def test_a_decompression_bomb_is_cut_and_reported_not_read_whole(tmp_path, monkeypatch):
    import firstfault.connectors.local_files as local_files

    monkeypatch.setattr(local_files, "RATIO_CHECKED_AFTER", 1 << 20)  # the default is 64 MiB
    xid = b"Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    (tmp_path / "node-01.log.gz").write_bytes(gzip.compress(xid + b"\n" * (32 << 20)))  # 32 MiB from ~32 KiB
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "{node}.log.gz"}])
    result = land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings())
    report = next(r for r in result.reports if r["uri"].endswith("node-01.log.gz"))
    assert report["status"] == "error" and "DecompressionBomb" in report["reason"] and "100:1" in report["reason"]
    assert 0 < report["rows"] < (8 << 20) and result.event_rows == 1  # what came out before is kept, the Xid too



def test_every_line_read_is_landed_or_counted_also_in_a_skipped_file(tmp_path):
    # lines read = rows + lines_skipped, whether the file is kept or skipped as binary, across pieces; lines_binary
    # counts the landed lines NUL bytes were stripped from
    (tmp_path / "node-01.log").write_bytes(b"\x01\x02junk\n" * 600 + b"readable\n" * 400)  # binary by its first piece
    (tmp_path / "node-02.log").write_bytes(b"line\n" * 900 + b"\x00nul\n" * 100)
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "{node}.log"}])
    result = land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings(batch_bytes=2048))
    reports = {r["uri"].rsplit("/", 1)[1]: r for r in result.reports}
    skipped, kept = reports["node-01.log"], reports["node-02.log"]
    assert skipped["status"] == "skipped" and skipped["rows"] == 0
    assert (skipped["lines_binary"], skipped["lines_skipped"]) == (0, 1000)
    assert kept["status"] == "ok" and (kept["rows"], kept["lines_binary"], kept["lines_skipped"]) == (1000, 100, 0)


def test_a_device_named_as_a_log_is_reported_not_read(tmp_path):
    ctx = make_ctx(tmp_path, nodes=["node-01"], logs=[{"source": "syslog", "path": "/dev/zero"}])
    result = land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings())
    (report,) = [r for r in result.reports if r["uri"] == "/dev/zero"]
    assert report["status"] == "missing" and report["reason"].startswith("not a regular file")


def test_a_failed_landing_keeps_the_earlier_one_and_a_reland_removes_old_tables(tmp_path, monkeypatch):
    (tmp_path / "node-01.log").write_text("Nov 29 01:10:02 node-01 kernel: hello\n")
    ctx = make_ctx(tmp_path, logs=[{"source": "syslog", "path": "{node}.log"}])
    lake = Lake(str(tmp_path / "lake"))
    old = tmp_path / "lake" / "inputs" / f"day={ctx.day}" / f"attempt_key={ctx.attempt_key}"  # an older version's table
    old.mkdir(parents=True)
    (old / "part-0.parquet").write_bytes(b"old")
    land_attempt(ctx, Lake(str(tmp_path / "lake")), load_patterns(), LandingSettings())
    assert not old.exists() and lake.files("logs", ctx.day, ctx.attempt_key)
    tables = ("logs", "events", "progress", "metrics", "context", "connector_reports", "flight_recorder")
    before = {t: lake.read(t, ctx.day, ctx.attempt_key) for t in tables}
    files = sorted(p.relative_to(tmp_path) for p in (tmp_path / "lake").rglob("*") if p.is_file())

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    (tmp_path / "node-01.log").write_text("Nov 29 01:10:02 node-01 kernel: changed\n")
    monkeypatch.setattr(landing, "context_table", broken)  # fails after logs and events were written
    failures = []
    assert landing.land_attempts([ctx], lake, load_patterns(), LandingSettings(), on_error=lambda c, e: failures.append(e)) == []
    assert len(failures) == 1
    # the earlier landing is still what every reader gets, and nothing of the failed one stays
    assert {t: lake.read(t, ctx.day, ctx.attempt_key) for t in tables} == before
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "lake").rglob("*") if p.is_file()) == files


def test_partition_files_lists_each_day_once_and_keeps_the_requested_order(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    table = pa.table({"x": [1]})
    for day, key in [("2026-11-01", "a"), ("2026-11-01", "a~2Fb"), ("2026-11-01", "b"), ("2026-11-02", "c")]:
        lake.write("events", day, key, table, table.schema)
    (tmp_path / "lake" / "events" / "day=2026-11-01" / "attempt_key=b" / "notes.txt").write_text("not a table file")
    wanted = [("2026-11-02", "c"), ("2026-11-01", "b"), ("2026-11-01", "a"), ("2026-11-03", "gone")]
    files = lake.partition_files("events", wanted)
    assert [f.split("/")[-3:-1] for f in files] == [["day=2026-11-02", "attempt_key=c"], ["day=2026-11-01", "attempt_key=b"],
                                                     ["day=2026-11-01", "attempt_key=a"]]
    assert all(f.endswith(".parquet") for f in files)
    assert lake.files("events", "2026-11-01", "a") == files[2:]


def test_local_files_read_without_fsspec_as_through_it(tmp_path):
    """Local files are listed, fingerprinted and read without fsspec's per-file set-up, with the same results as
    through it: URLs, fingerprints (fsspec's `ukey`), bytes and line numbers, a UTF-16 file decoded."""
    import fsspec

    from firstfault.connectors.local_files import _glob, _plain_local_path, fingerprint, GlobLimits

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_bytes(b"one\ntwo\nthree")
    (tmp_path / "logs" / "w.log").write_bytes("x\ny\n".encode("utf-16"))
    for rel in ("logs/*.log", "logs/a.log", "./logs/a.log", "logs//a.log", "logs/../logs/a.log"):
        fast = _glob(str(tmp_path), rel, GlobLimits(), float("inf"))
        fs, path = fsspec.core.url_to_fs(f"{tmp_path}/{rel}")
        assert fast == ([fs.unstrip_protocol(p) for p in sorted(fs.glob(path))], None), rel
    uri = f"file://{tmp_path}/logs/a.log"
    assert _plain_local_path(uri) == f"{tmp_path}/logs/a.log" and _plain_local_path(f"file://{tmp_path}/./a") is None
    fs, path = fsspec.core.url_to_fs(uri)
    assert fingerprint(uri) == str(fs.ukey(path))
    assert list(read_batches(uri, 1 << 16, 1 << 10, max_lines=2)) == [(b"one\ntwo\n", 1, 0), (b"three", 3, 0)]
    assert b"".join(c for c, _, _ in read_batches(f"file://{tmp_path}/logs/w.log", 1 << 16, 1 << 10)) == b"x\ny\n"
