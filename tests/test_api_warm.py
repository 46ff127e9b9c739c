"""The API's rule pass stays warm (rules_sql/prepared.py): requests back to back on one connection give the verdicts
of cold runs, and nothing of one request is left on the connection for the next."""
import dataclasses
import json
import time

import yaml

from firstfault.api import Attributor
from firstfault.cli import main
from firstfault.config import ApiSettings, resolve_config
from firstfault.rules_sql.prepared import WarmRulePass
from firstfault.run import load_rule_set

ATTEMPTS = ("headline", "lost-gpu", "headline")


def cold_verdict(demo_dir, name, tmp_path, capsys) -> dict:
    out = tmp_path / f"cold-{name}"
    assert main(["attribute", "--static", str(demo_dir / "attempts" / name / "attempt.yaml"), "--json",
                 "--warehouse", str(out / "w.duckdb"), "--lake", str(out / "lake")]) == 0
    return json.loads(capsys.readouterr().out)


def test_requests_back_to_back_give_the_verdicts_of_cold_runs(demo_dir, tmp_path, capsys):
    expected = {name: cold_verdict(demo_dir, name, tmp_path, capsys) for name in set(ATTEMPTS)}
    assert expected["headline"]["subdomain"] != expected["lost-gpu"]["subdomain"]
    config = resolve_config(None, lake_root=str(tmp_path / "api-lake"), warehouse_path=str(tmp_path / "api.duckdb"))
    attributor = Attributor(dataclasses.replace(config, api=ApiSettings(allowed_roots=(str(demo_dir),))))
    for name in ATTEMPTS:
        folder = demo_dir / "attempts" / name
        body = {**yaml.safe_load((folder / "attempt.yaml").read_text()), "base_dir": str(folder)}
        assert attributor.attribute(body, time.monotonic() + 300) == expected[name], name


def test_a_warm_pass_leaves_only_the_reference_tables(tmp_path):
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "w.duckdb"))
    warm = WarmRulePass(config.attribution, load_rule_set(config).version)
    tables = "SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY ALL"
    with warm.connection() as con:
        reference = con.execute(tables).fetchall()
        con.execute("CREATE TEMP TABLE events_all AS SELECT 1 AS x")
        con.execute("CREATE TEMP VIEW events AS SELECT * FROM events_all")
    with warm.connection() as con:
        assert con.execute(tables).fetchall() == reference
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal").fetchall() == [(0,)]
        assert {"xid_catalog", "params", "exception_symptoms"} <= {name for (name,) in reference}
    warm.close()
