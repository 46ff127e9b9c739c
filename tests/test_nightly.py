"""The nightly run: discovery by end date, sharding, incremental skips, failure isolation, --force, the flow."""
import contextlib
import shutil
from dataclasses import replace
from datetime import date

import duckdb
import pytest
import yaml

from firstfault import nightly
from firstfault.cli import main
from firstfault.lake import Lake
from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.synthetic.demo import EXPECTED, write_demo
from firstfault.connectors.catalog import Candidate, catalog_patterns, discover, list_specs
from firstfault.nightly import make_shards, run_nightly
from firstfault.schema import ATTEMPT_TABLES
from firstfault.warehouse.store import connect_writer
from firstfault.workers import process_pool

DAY = "2026-11-29"


def make_catalog(root, names):
    """A catalog folder with the demo attempts `names` only."""
    write_demo(root / "demo")
    for name in names:
        shutil.copytree(root / "demo" / "attempts" / name, root / "catalog" / name)
    return root / "catalog"


def config_for(tmp_path):
    return Config(lake=LakeSettings(root=str(tmp_path / "lake")), warehouse=WarehouseSettings(path=str(tmp_path / "wh.duckdb")))


def counts(path):
    con = duckdb.connect(path, read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ATTEMPT_TABLES}
    finally:
        con.close()


def query(path, sql):
    con = duckdb.connect(path, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def set_end(spec, end):
    doc = yaml.safe_load(spec.read_text())
    if end is None:
        doc.pop("end")
    else:
        doc["end"] = end
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_discovery_by_end_date(tmp_path):
    catalog = make_catalog(tmp_path, ["headline", "cuda-oom", "success", "time-limit"])
    set_end(catalog / "success" / "attempt.yaml", "2026-11-30T00:30:00Z")   # ended the next UTC day
    set_end(catalog / "time-limit" / "attempt.yaml", None)                 # still running: not discovered
    patterns = catalog_patterns(Config(), str(catalog))
    by_day, failures, ended = discover(patterns, [date(2026, 11, 29)])
    found = by_day[date(2026, 11, 29)]
    assert ended == {date(2026, 11, 29): 2, date(2026, 11, 30): 1} and failures == []
    assert [c.attempt_id for c in found] == ["demo/demo-cuda-oom/0", "demo/demo-headline/0"]
    assert all(len(c.fingerprint) == 64 for c in found)
    assert [c.attempt_id for c in discover(patterns, [date(2026, 11, 30)])[0][date(2026, 11, 30)]] == ["demo/demo-success/0"]
    assert discover(patterns, [date(2026, 11, 28)])[0] == {date(2026, 11, 28): []}
    # a glob in [catalog] paths works the same as the folder
    assert discover([str(catalog / "*" / "attempt.yaml")], [date(2026, 11, 29)])[0][date(2026, 11, 29)] == found


def test_sharding_keeps_workloads_together_and_is_deterministic():
    cands = [Candidate(f"s{w}-{a}", f"c/w{w}/{a}", "c", f"w{w}", "f") for w in range(7) for a in range(w % 3 + 1)]
    shards = make_shards(cands, 3)
    assert len(shards) == 3 and sorted(c.attempt_id for s in shards for c in s) == sorted(c.attempt_id for c in cands)
    for s in shards:
        for c in s:
            assert all(o.workload_id != c.workload_id for t in shards if t is not s for o in t)
    assert make_shards(list(reversed(cands)), 3) == shards
    assert max(map(len, shards)) - min(map(len, shards)) <= 3
    assert len(make_shards(cands[1:3], 10)) == 1  # one workload: one shard
    assert make_shards([], 4) == []


def test_incremental_runs_skip_unchanged_and_force_redoes(tmp_path):
    catalog = make_catalog(tmp_path, ["headline", "cuda-oom", "success"])
    config = config_for(tmp_path)
    first = run_nightly(config, DAY, str(catalog), shards=2)
    assert (first["found"], first["skipped"], first["attributed"], first["failed"]) == (3, 0, 3, 0)
    assert first["verdicts"] == {"attributed": 2, "not_failed": 1}
    rows = counts(config.warehouse.path)
    verdicts = query(config.warehouse.path, "SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, input_fingerprint "
                                            "FROM attributions ORDER BY attempt_id")
    for attempt_id, verdict, domain, subdomain, culprits, fp in verdicts:
        assert (verdict, domain, subdomain, culprits) == EXPECTED[attempt_id.split("/")[1].removeprefix("demo-")]
        assert fp and len(fp) == 64

    second = run_nightly(config, DAY, str(catalog), shards=2)
    assert (second["found"], second["skipped"], second["attributed"], second["shards"]) == (3, 3, 0, 0)
    assert counts(config.warehouse.path) == rows
    assert query(config.warehouse.path, "SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, input_fingerprint "
                                        "FROM attributions ORDER BY attempt_id") == verdicts

    # a new attempt is the only one processed; a changed input file redoes its attempt
    shutil.copytree(tmp_path / "demo" / "attempts" / "python-exception", catalog / "python-exception")
    third = run_nightly(config, DAY, str(catalog))
    assert (third["found"], third["skipped"], third["attributed"]) == (4, 3, 1)
    log = catalog / "cuda-oom" / "app" / "train.log"
    log.write_text(log.read_text() + "0: one more line\n")
    fourth = run_nightly(config, DAY, str(catalog))
    assert (fourth["skipped"], fourth["attributed"]) == (3, 1)
    rows = counts(config.warehouse.path)

    forced = run_nightly(config, DAY, str(catalog), force=True)
    assert (forced["found"], forced["skipped"], forced["attributed"]) == (4, 0, 4)
    assert counts(config.warehouse.path) == rows
    runs = query(config.warehouse.path, "SELECT flow, run_date, found, skipped, attempts, failed FROM runs ORDER BY started_at")
    assert runs[0] == ("nightly", DAY, 3, 0, 3, 0) and runs[1] == ("nightly", DAY, 3, 3, 0, 0) and len(runs) == 5
    # the shard hand-over folders are gone once loaded
    assert not (tmp_path / "lake" / "results").exists() or not any((tmp_path / "lake" / "results").iterdir())


def test_a_bad_attempt_is_recorded_and_the_others_attributed(tmp_path, monkeypatch, capsys):
    catalog = make_catalog(tmp_path, ["headline", "cuda-oom", "success"])
    (catalog / "broken").mkdir()
    (catalog / "broken" / "attempt.yaml").write_text("workload_id: broken\nstart: 2026-11-29T01:00:00Z\n")  # no nodes
    (catalog / "garbage.yaml").write_text("{ not: yaml: at all")

    import firstfault.landing as landing

    real_land = landing._land_logs

    def flaky_land(items, *a, **kw):  # the joint pass fails, then only this attempt's own
        if any(item.ctx.workload_id == "demo-cuda-oom" for item in items):
            raise OSError("connector error: connection reset while reading app/train.log")
        return real_land(items, *a, **kw)

    monkeypatch.setattr(landing, "_land_logs", flaky_land)
    config = config_for(tmp_path)
    assert main(["nightly", "--date", DAY, "--catalog", str(catalog), "--lake", config.lake.root, "--warehouse",
                 config.warehouse.path, "--prefect", "never"]) == 0
    out = capsys.readouterr().out
    assert "attributed 2, failed 3" in out and "FAILED demo/demo-cuda-oom/0 [land]" in out
    assert query(config.warehouse.path, "SELECT attempt_id FROM attributions ORDER BY 1") == [
        ("demo/demo-headline/0",), ("demo/demo-success/0",)]
    failures = query(config.warehouse.path, "SELECT attempt_id, stage, spec_uri, error FROM run_failures ORDER BY stage, spec_uri")
    stages = sorted((s, a) for a, s, _, _ in failures)
    assert stages == [("land", "demo/demo-cuda-oom/0"), ("spec", None), ("spec", None)]
    assert any("nodes" in e for _, s, _, e in failures if s == "spec")
    # the failed attempt is retried next night (it has no warehouse row); the good ones are skipped
    monkeypatch.setattr(landing, "_land_logs", real_land)
    again = run_nightly(config, DAY, str(catalog))
    assert (again["skipped"], again["attributed"], again["failed"]) == (2, 1, 2)


def test_an_old_warehouse_gains_the_new_columns(tmp_path):
    path = str(tmp_path / "old.duckdb")
    con = duckdb.connect(path)
    con.execute("CREATE TABLE attributions (attempt_id VARCHAR PRIMARY KEY, verdict VARCHAR)")
    con.execute("CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, flow VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP, "
                "attempts BIGINT, rules_version VARCHAR, lake_root VARCHAR)")
    con.close()
    con = connect_writer(path)
    cols = {r[0] for r in con.execute("DESCRIBE attributions").fetchall()}
    assert "input_fingerprint" in cols
    assert {"run_date", "found", "skipped", "failed"} <= {r[0] for r in con.execute("DESCRIBE runs").fetchall()}
    con.close()


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["nightly", "--date", "yesterday", "--catalog", str(tmp_path)]) == 2
    assert main(["nightly", "--catalog", str(tmp_path), "--address", "tcp://x:8786", "--prefect", "never"]) == 2
    assert main(["nightly", "--prefect", "never", "--warehouse", str(tmp_path / "w.duckdb")]) == 2  # no catalog
    assert "catalog" in capsys.readouterr().err


@pytest.mark.flow
def test_nightly_flow_from_the_cli(prefect_api, tmp_path, capsys):
    catalog = make_catalog(tmp_path, ["headline", "lost-gpu", "success"])
    config = config_for(tmp_path)
    args = ["nightly", "--date", DAY, "--catalog", str(catalog), "--lake", config.lake.root, "--warehouse",
            config.warehouse.path, "--shards", "2", "--prefect", "always"]
    assert main(args) == 0
    assert "attributed 3, failed 0  (2 shards)" in capsys.readouterr().out
    assert query(config.warehouse.path, "SELECT flow, found, attempts FROM runs") == [("nightly", 3, 3)]
    assert query(config.warehouse.path, "SELECT attempt_id, subdomain FROM attributions ORDER BY 1") == [
        ("demo/demo-headline/0", "gpu_nvlink"), ("demo/demo-lost-gpu/0", "gpu_lost"), ("demo/demo-success/0", None)]
    assert main([*args, "--json"]) == 0
    assert '"skipped": 3' in capsys.readouterr().out


def test_serve_deployment_definition(tmp_path):
    from firstfault.flows.nightly import deployment

    cfg = tmp_path / "firstfault.toml"
    cfg.write_text('[schedule]\ncron = "30 3 * * *"\n[catalog]\npaths = ["catalog/**/*.yaml"]\n')
    dep = deployment(str(cfg))
    assert dep.name == "nightly" and dep.flow_name == "nightly"
    assert [s.schedule.cron for s in dep.schedules] == ["30 3 * * *"]
    assert dep.parameters == {"config_path": str(cfg)}
    assert deployment(str(cfg), cron="0 1 * * *", catalog="s3://b/c").parameters == {"config_path": str(cfg), "catalog": "s3://b/c"}
    assert Config().schedule.cron == "0 2 * * *"


def test_backfill_since_until_runs_each_night_once_with_one_discovery(tmp_path, monkeypatch, capsys):
    catalog = make_catalog(tmp_path, ["headline", "cuda-oom", "success", "python-exception"])
    set_end(catalog / "success" / "attempt.yaml", "2026-11-30T00:30:00Z")
    set_end(catalog / "python-exception" / "attempt.yaml", "2026-12-01T05:00:00Z")
    listed, pools, rebuilds, checkpoints = [], [], [], []
    monkeypatch.setattr("firstfault.connectors.catalog.list_specs", lambda patterns, real=list_specs: listed.append(1) or real(patterns))
    monkeypatch.setattr("firstfault.nightly.rebuild", lambda *a, real=nightly.rebuild, **k: rebuilds.append(1) or real(*a, **k))
    monkeypatch.setattr("firstfault.nightly.load_attempts",
                        lambda *a, real=nightly.load_attempts, **k: checkpoints.append(k.get("checkpoint", True)) or real(*a, **k))
    monkeypatch.setattr("firstfault.nightly._PARALLEL_MIN_ATTEMPTS", 1)  # every night's shards go to worker processes
    monkeypatch.setattr("firstfault.nightly.process_pool", lambda workers, real=process_pool: pools.append(workers) or real(workers))
    flags = ["--catalog", str(catalog), "--lake", str(tmp_path / "lake"), "--prefect", "never"]
    assert main(["nightly", "--since", "2026-11-28", "--until", "2026-12-01", *flags, "--warehouse", str(tmp_path / "all.duckdb")]) == 0
    assert len(listed) == 1  # the catalog is read once for every night
    assert len(pools) == 1  # and the shard processes are started once for every night
    assert rebuilds == [1] and checkpoints == [False, False, False, True]  # the history's costs once, after the last night
    runs = query(str(tmp_path / "all.duckdb"), "SELECT run_date, found, attempts FROM runs ORDER BY run_date")
    assert runs == [("2026-11-28", 0, 0), ("2026-11-29", 2, 2), ("2026-11-30", 1, 1), ("2026-12-01", 1, 1)]
    assert capsys.readouterr().out.count("nightly 2026-") == 4
    # the same rows as the nights run one by one
    for day in ("2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01"):
        assert main(["nightly", "--date", day, *flags, "--warehouse", str(tmp_path / "one.duckdb")]) == 0
    sql = "SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, evidence FROM attributions ORDER BY attempt_id"
    assert query(str(tmp_path / "all.duckdb"), sql) == query(str(tmp_path / "one.duckdb"), sql)
    for table in ("node_offenders", "port_hotspots", "gpu_model_trends", "incidents"):
        sql = f"SELECT * FROM {table} ORDER BY ALL"
        assert query(str(tmp_path / "all.duckdb"), sql) == query(str(tmp_path / "one.duckdb"), sql), table


@pytest.mark.parametrize("args", [["--until", "2026-11-29"], ["--since", "2026-11-30", "--until", "2026-11-29"],
                                  ["--since", "2026-11-29", "--date", "2026-11-29"], ["--since", "29.11.2026"]])
def test_backfill_range_errors_are_bad_input(tmp_path, args, capsys):
    with pytest.raises(SystemExit) if "--date" in args else contextlib.nullcontext():  # argparse: mutually exclusive
        code = main(["nightly", *args, "--catalog", str(tmp_path), "--warehouse", str(tmp_path / "w.duckdb")])
        assert code == 2 and capsys.readouterr().err.count("\n") == 1


def test_a_catalog_that_does_not_exist_or_matches_nothing_is_bad_input(tmp_path, capsys):
    wh = str(tmp_path / "wh.duckdb")
    assert main(["nightly", "--date", DAY, "--catalog", str(tmp_path / "catalg"), "--warehouse", wh]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"firstfault: {tmp_path / 'catalg'}: field '--catalog': no such folder or file"
    (tmp_path / "firstfault.toml").write_text(f'[catalog]\npaths = ["{tmp_path}/*/attempt.yml"]\n')
    assert main(["nightly", "--date", DAY, "--config", str(tmp_path / "firstfault.toml"), "--warehouse", wh]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("field 'catalog.paths': matches no file") and len(err.splitlines()) == 1
    assert not (tmp_path / "wh.duckdb").exists()


def test_an_empty_night_names_the_nearest_days_and_leaves_the_fleet_alone(tmp_path, capsys):
    catalog = make_catalog(tmp_path, ["headline", "success"])
    set_end(catalog / "success" / "attempt.yaml", "2026-12-03T00:30:00Z")
    wh = str(tmp_path / "wh.duckdb")
    assert main(["nightly", "--date", "2026-12-01", "--catalog", str(catalog), "--warehouse", wh,
                 "--lake", str(tmp_path / "lake")]) == 0
    out = capsys.readouterr().out
    assert "no attempts ended on 2026-12-01 (UTC); nearest days with attempts: 2026-11-29 (1), 2026-12-03 (1)" in out
    assert "fleet aggregates" not in out
    assert main(["nightly", "--date", DAY, "--catalog", str(catalog), "--warehouse", wh,
                 "--lake", str(tmp_path / "lake")]) == 0
    assert "fleet aggregates: rebuilt" in capsys.readouterr().out
    assert main(["nightly", "--date", DAY, "--catalog", str(catalog), "--warehouse", wh,
                 "--lake", str(tmp_path / "lake")]) == 0
    out = capsys.readouterr().out
    assert "skipped (unchanged) 1, attributed 0" in out and "fleet aggregates" not in out


def test_a_shard_builds_its_lake_once_for_landing_the_rule_pass_and_its_results(tmp_path, monkeypatch):
    catalog = make_catalog(tmp_path, ["headline", "cuda-oom"])
    config = config_for(tmp_path)
    built, per_shard = [], []
    monkeypatch.setattr("firstfault.lake.Lake.__init__", lambda self, *a, real=Lake.__init__, **k: built.append(1) or real(self, *a, **k))

    def counted_shard(*args, real=nightly.run_shard, **kwargs):
        before = len(built)
        url = real(*args, **kwargs)
        per_shard.append(len(built) - before)
        return url

    monkeypatch.setattr("firstfault.nightly.run_shard", counted_shard)
    assert run_nightly(config, DAY, str(catalog), shards=2)["attributed"] == 2
    assert per_shard == [1, 1]


def test_new_attribution_settings_attribute_every_attempt_again(tmp_path):
    """rules_version covers the [attribution] settings: after a threshold changes, the nightly skips nothing."""
    catalog = make_catalog(tmp_path, ["headline", "success"])
    config = config_for(tmp_path)
    assert run_nightly(config, DAY, str(catalog))["attributed"] == 2
    assert run_nightly(config, DAY, str(catalog))["skipped"] == 2
    stricter = replace(config, attribution=replace(config.attribution, ambiguity_margin=0.2))
    again = run_nightly(stricter, DAY, str(catalog))
    assert (again["skipped"], again["attributed"]) == (0, 2)
    versions = query(config.warehouse.path, "SELECT DISTINCT rules_version FROM runs")
    assert len(versions) == 2
