"""`--output sqlite:PATH` and `--output jsonl:PATH`: every verdict field reads back equal to the warehouse's, re-runs
upsert (SQLite) or append (JSONL), and bad values are exit 2 naming the flag."""
import json
import sqlite3

import pytest

from firstfault.cli import main
from firstfault.synthetic.demo import EXPECTED
from firstfault.warehouse.outputs import write_sqlite
from firstfault.warehouse.read import stored_verdicts
from firstfault.schema import VERDICT_KEYS


def sqlite_verdicts(path) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """The rows of a SQLite output by attempt_id (JSON columns still text) and their evidence entries rebuilt."""
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    try:
        verdicts = {}
        for row in con.execute("SELECT * FROM verdicts"):
            verdicts[row["attempt_id"]] = dict(row)
        evidence = {}
        for row in con.execute("SELECT * FROM evidence ORDER BY attempt_id, position"):
            item = {k: row[k] for k in ("role", "source", "uri", "line", "ts", "text")}
            item["kinds"] = json.loads(row["kinds"])
            if row["locator"] is not None:
                item["locator"] = json.loads(row["locator"])
            evidence.setdefault(row["attempt_id"], []).append(item)
        return verdicts, evidence
    finally:
        con.close()


def assert_sqlite_matches(path, expected: list[dict]):
    rows, evidence = sqlite_verdicts(path)
    assert sorted(rows) == sorted(v["attempt_id"] for v in expected)
    for v in expected:
        row = rows[v["attempt_id"]]
        assert set(row) == set(VERDICT_KEYS)
        decoded = {k: json.loads(row[k]) if isinstance(v[k], (list, dict)) else row[k] for k in VERDICT_KEYS}
        assert decoded == v
        assert evidence.get(v["attempt_id"], []) == v["evidence"]


def jsonl_verdicts(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_attribute_outputs_round_trip_and_rerun(demo_dir, tmp_path, capsys):
    wh, db, stream = str(tmp_path / "w.duckdb"), tmp_path / "out" / "verdicts.sqlite", tmp_path / "out" / "verdicts.jsonl"
    args = ["attribute", "--static", str(demo_dir / "attempts" / "headline" / "attempt.yaml"), "--json", "--warehouse", wh,
            "--lake", str(tmp_path / "lake"), "--output", f"sqlite:{db}", "--output", f"jsonl:{stream}"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    stored = stored_verdicts(wh, [printed["attempt_id"]])
    assert stored == [printed]
    assert_sqlite_matches(db, stored)
    assert jsonl_verdicts(stream) == stored and stored[0]["schema_version"] == "1"

    assert main(args) == 0  # the same attempt again: one SQLite row (upserted), one more JSONL line
    capsys.readouterr()
    assert_sqlite_matches(db, stored)
    assert jsonl_verdicts(stream) == stored * 2


def test_sqlite_keeps_evidence_locators(demo_dir, tmp_path, capsys):
    """Evidence from remote sources carries a locator object instead of a line (the demo has none: add one)."""
    assert main(["attribute", "--static", str(demo_dir / "attempts" / "lost-gpu" / "attempt.yaml"), "--json",
                 "--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake")]) == 0
    verdict = json.loads(capsys.readouterr().out)
    verdict["evidence"][0] = {**verdict["evidence"][0], "line": None,
                              "locator": {"origin": {"url": "http://loki:3100", "stream": {"node": "gpu-b2"}}, "ts_ns": 1}}
    write_sqlite(str(tmp_path / "v.sqlite"), [verdict])
    assert_sqlite_matches(tmp_path / "v.sqlite", [verdict])


def test_demo_and_nightly_outputs(tmp_path, capsys):
    db, stream = tmp_path / "demo.sqlite", tmp_path / "demo.jsonl"
    assert main(["demo", "--dir", str(tmp_path / "demo"), "--fleet", "0", "--json",
                 "--output", f"sqlite:{db}", "--output", f"jsonl:{stream}"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(printed) == len(EXPECTED) and jsonl_verdicts(stream) == printed
    assert_sqlite_matches(db, printed)

    # nightly: the verdicts of the attempts that run attributed (the demo's headline night), nothing when all are unchanged
    night_db, night_stream = tmp_path / "night.sqlite", tmp_path / "night.jsonl"
    nightly = ["nightly", "--date", "2026-11-29", "--catalog", str(tmp_path / "demo" / "attempts"), "--json",
               "--lake", str(tmp_path / "night-lake"), "--warehouse", str(tmp_path / "night.duckdb"),
               "--output", f"sqlite:{night_db}", "--output", f"jsonl:{night_stream}", "--prefect", "never"]
    assert main(nightly) == 0
    summary = json.loads(capsys.readouterr().out)
    attributed = stored_verdicts(str(tmp_path / "night.duckdb"), summary["attempt_ids"])
    assert summary["attributed"] == len(attributed) > 0
    assert jsonl_verdicts(night_stream) == attributed
    assert_sqlite_matches(night_db, attributed)
    assert main(nightly) == 0
    assert json.loads(capsys.readouterr().out)["attempt_ids"] == []
    assert jsonl_verdicts(night_stream) == attributed
    assert_sqlite_matches(night_db, attributed)


@pytest.mark.parametrize("value", ["verdicts.sqlite", "parquet:x.parquet", "jsonl:", "sqlite:  "])
def test_bad_output_value_is_exit_2_naming_the_flag(tmp_path, capsys, value):
    spec = tmp_path / "never-read.yaml"
    assert main(["attribute", "--static", str(spec), "--warehouse", str(tmp_path / "w.duckdb"), "--output", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--output" in err and repr(value) in err


def test_unwritable_output_is_exit_2(demo_dir, tmp_path, capsys):
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database\n" * 100)
    assert main(["attribute", "--static", str(demo_dir / "attempts" / "success" / "attempt.yaml"), "--warehouse",
                 str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake"), "--output", f"sqlite:{not_sqlite}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--output sqlite:{not_sqlite}" in err
