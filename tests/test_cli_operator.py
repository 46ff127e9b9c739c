"""What an operator meets first on the command line: bad input is one line with exit 2, the text output says what
--json says, help shows defaults and examples, `init`, completion, --json for the rule kit, -q/-v and progress."""
import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from firstfault import progress
from firstfault.cli import _parser, main
from firstfault.config import Config, load_config

REPO = Path(__file__).resolve().parents[1]
BUILTIN_FIXTURES = REPO / "rules_sql"


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main(list(args))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def subcommands(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


# --- the text verdict says what --json says -----------------------------------------------------------------------

def test_text_verdict_names_the_missing_source_and_the_confidence_reasons(demo_dir, tmp_path, capsys):
    attempt = tmp_path / "attempt"
    shutil.copytree(demo_dir / "attempts" / "python-exception", attempt)
    shutil.rmtree(attempt / "kernel")  # its syslog source, kernel/{node}.log, now matches no file
    rc, out, _ = run(capsys, "attribute", "--static", str(attempt / "attempt.yaml"), "--warehouse", str(tmp_path / "w.duckdb"),
                     "--lake", str(tmp_path / "lake"))
    assert rc == 0
    assert "input missing: syslog" in out and "kernel/" in out and "no file matches" in out
    assert "confidence low: " in out and "sources missing or unusable: syslog" in out


def test_one_evidence_line_is_listed_once_as_root_cause(demo_dir, tmp_path, capsys):
    rc, out, _ = run(capsys, "attribute", "--static", str(demo_dir / "attempts" / "cuda-oom" / "attempt.yaml"), "--json",
                     "--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake"))
    assert rc == 0
    verdict = json.loads(out)
    places = [(e["uri"], e["line"]) for e in verdict["evidence"]]
    assert len(places) == len(set(places)), "an evidence line is listed twice"
    root = [(e["uri"], e["line"]) for e in verdict["evidence"] if e["role"] == "root_cause"]
    assert root and root[0] not in [(e["uri"], e["line"]) for e in verdict["evidence"] if e["role"] == "symptom"]


def test_a_line_of_two_events_is_one_evidence_entry_with_both_kinds(demo_dir, tmp_path, capsys):
    # the headline's `[rank3]: torch.distributed.DistBackendError: NCCL error …` line is a Python exception line and
    # an NCCL result: one entry in the JSON, the text and attribution_evidence, naming both kinds
    spec = str(demo_dir / "attempts" / "headline" / "attempt.yaml")
    where = ["--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake")]
    rc, out, _ = run(capsys, "attribute", "--static", spec, "--json", *where)
    assert rc == 0
    verdict = json.loads(out)
    places = [(e["uri"], e["line"]) for e in verdict["evidence"]]
    assert len(places) == len(set(places)), "an evidence line is listed twice"
    both = [e for e in verdict["evidence"] if e["kinds"] == ["exception_line", "nccl_result"]]
    assert len(both) == 2 and all(e["role"] == "symptom" for e in both)
    assert all(e["kinds"] for e in verdict["evidence"])
    rows = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True).execute(
        "SELECT uri, line, kinds FROM attribution_evidence WHERE attempt_id = ? ORDER BY position", [verdict["attempt_id"]]).fetchall()
    assert [(u, n) for u, n, _ in rows] == places and [k for _, _, k in rows] == [e["kinds"] for e in verdict["evidence"]]
    rc, out, _ = run(capsys, "attribute", "--static", spec, *where)
    lines = [line.split("] ", 1)[1] for line in out.splitlines() if line.startswith("  [")]
    assert len(lines) == len(set(lines)), out
    symptom_lines = len({(s["uri"], s["line"]) for s in verdict["symptoms"]})
    assert 0 < symptom_lines < len(verdict["symptoms"])
    assert f"  symptoms: {len(verdict['symptoms'])} on {symptom_lines} lines (node-01, node-02, node-03)" in out


def test_a_warehouse_from_before_evidence_kinds_keeps_them_from_its_next_load(demo_dir, tmp_path, capsys):
    from firstfault.warehouse.store import connect_writer, schema_sql

    old = tmp_path / "w.duckdb"
    con = duckdb.connect(str(old))
    con.execute(schema_sql().replace(", kinds VARCHAR[])[]", ")[]").replace(", uri VARCHAR, line BIGINT)[]", ")[]")
                .replace("kinds      VARCHAR[],", ""))
    con.close()
    connect_writer(str(old)).close()
    spec = str(demo_dir / "attempts" / "headline" / "attempt.yaml")
    rc, out, _ = run(capsys, "attribute", "--static", spec, "--json", "--warehouse", str(old), "--lake", str(tmp_path / "lake"))
    verdict = json.loads(out)
    assert rc == 0 and all(e["kinds"] for e in verdict["evidence"]) and all(s["line"] for s in verdict["symptoms"])


def test_the_runner_up_and_why_it_lost_in_json_text_and_warehouse(tmp_path, capsys):
    # the rule kit's late case: a fatal NVLink record on node-02 five minutes after node-01 lost its GPU
    from firstfault.rules_sql.cases import load_cases, write_case

    [case] = [c for c in load_cases([BUILTIN_FIXTURES]) if c.name == "a_fatal_record_five_minutes_after_another_loses_as_late"]
    spec = tmp_path / "attempt" / "attempt.yaml"
    context = write_case(case, spec.parent)
    spec.write_text(json.dumps(context), encoding="utf-8")
    where = ["--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake")]
    rc, out, _ = run(capsys, "attribute", "--static", str(spec), "--json", *where)
    why_not = json.loads(out)["why_not"]
    assert rc == 0 and (why_not["domain"], why_not["subdomain"], why_not["node"], why_not["reason"]) == (
        "hardware", "gpu_nvlink", "node-02", "late")
    assert not any("runner-up" in r for r in json.loads(out)["quality"]["reasons"])  # the field, not a reason line too
    rc, out, _ = run(capsys, "attribute", "--static", str(spec), *where)
    assert f"  Not hardware/gpu_nvlink on node-02: {why_not['detail']}" in out.splitlines()
    stored = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True).execute("SELECT why_not FROM attributions").fetchall()
    assert stored == [(why_not,)]


def test_a_warehouse_from_before_why_not_reads_it_as_null_until_its_next_load(demo_dir, tmp_path, capsys):
    from firstfault.warehouse.read import stored_verdicts
    from firstfault.warehouse.store import schema_sql

    old = tmp_path / "w.duckdb"
    spec = str(demo_dir / "attempts" / "headline" / "attempt.yaml")
    rc, out, _ = run(capsys, "attribute", "--static", spec, "--json", "--warehouse", str(old), "--lake", str(tmp_path / "lake"))
    verdict = json.loads(out)
    con = duckdb.connect(str(old))
    con.execute("ALTER TABLE attributions DROP COLUMN why_not")
    con.execute("COMMENT ON TABLE runs IS 'firstfault schema older'")
    con.close()
    assert stored_verdicts(str(old), [verdict["attempt_id"]]) == [{**verdict, "why_not": None}]
    assert "why_not" in schema_sql()
    rc, out, _ = run(capsys, "attribute", "--static", spec, "--json", "--warehouse", str(old), "--lake", str(tmp_path / "lake"))
    assert rc == 0 and stored_verdicts(str(old), [verdict["attempt_id"]]) == [json.loads(out)]


# --- bad input: one line, exit 2, a real field ----------------------------------------------------------------------

def test_sql_table_marks_cut_values_with_an_ellipsis(tmp_path, capsys):
    warehouse = tmp_path / "w.duckdb"
    duckdb.connect(str(warehouse)).close()
    rc, out, _ = run(capsys, "sql", "--warehouse", str(warehouse), "SELECT repeat('x', 100) AS long, 'short' AS s")
    assert rc == 0
    row = out.splitlines()[2]
    assert row.startswith("x" * 59 + "… | short")


def test_a_missing_table_names_the_warehouse_that_was_opened(tmp_path, capsys):
    warehouse = tmp_path / "w.duckdb"
    duckdb.connect(str(warehouse)).close()
    rc, _, err = run(capsys, "sql", "--warehouse", str(warehouse), "SELECT * FROM node_offenders")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "node_offenders does not exist" in err and err.strip().endswith(f"does not exist (warehouse {warehouse})")


def test_a_corrupt_warehouse_is_bad_input_and_report_leaves_no_folder(tmp_path, capsys):
    warehouse = tmp_path / "w.duckdb"
    warehouse.write_bytes(b"this is not a DuckDB file\n" * 100)
    for command in (["sql", "SELECT 1"], ["report", "--out", str(tmp_path / "report")],
                    ["fleet", "rebuild"]):
        rc, out, err = run(capsys, *command, "--warehouse", str(warehouse))
        assert rc == 2, (command, err)
        assert err.startswith(f"firstfault: {warehouse}: field 'warehouse': not a usable DuckDB file") and len(err.splitlines()) == 1
    assert not (tmp_path / "report").exists()
    rc, _, err = run(capsys, "report", "--warehouse", str(tmp_path / "missing.duckdb"), "--out", str(tmp_path / "report"))
    assert rc == 2 and "missing.duckdb" in err
    assert not (tmp_path / "report").exists()


def test_file_level_errors_name_no_placeholder_field(tmp_path, capsys):
    config = tmp_path / "firstfault.toml"
    config.write_text("[lake\n")
    rc, _, err = run(capsys, "sql", "SELECT 1", "--config", str(config))
    assert rc == 2 and err.startswith(f"firstfault: {config}: not valid TOML") and "field '-'" not in err
    rc, _, err = run(capsys, "attribute", "--static", str(tmp_path / "nope.yaml"), "--warehouse", str(tmp_path / "w.duckdb"))
    assert rc == 2 and err.strip() == f"firstfault: {tmp_path / 'nope.yaml'}: file not found"


def test_serve_without_a_prefect_server_says_what_to_start(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PREFECT_HOME": str(tmp_path / "prefect")}
    done = subprocess.run([sys.executable, "-m", "firstfault.cli", "serve"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "PREFECT_API_URL" in done.stderr and "prefect server start" in done.stderr
    env["PREFECT_API_URL"] = "http://127.0.0.1:9/api"  # nothing listens on the discard port
    done = subprocess.run([sys.executable, "-m", "firstfault.cli", "serve"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "no Prefect server answers at http://127.0.0.1:9/api" in done.stderr


# --- what users expect -----------------------------------------------------------------------------------------------

def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip().startswith("firstfault ")


def test_every_subcommand_has_an_example_and_shows_its_defaults():
    commands = dict(subcommands(_parser()))
    assert {("init",), ("completion",), ("rules", "test"), ("fleet", "rebuild")} <= set(commands)
    for path, parser in commands.items():
        text = parser.format_help()
        assert "example" in text and f"firstfault {path[0]}" in text.split("example")[-1], path
    def help_of(*path):
        return " ".join(commands[path].format_help().split())
    assert "(default: firstfault-demo)" in help_of("demo")
    assert "(default: 0)" in help_of("simulate")  # --seed
    assert "(default: table)" in help_of("sql")
    assert "(default: False)" not in help_of("demo") and "(default: [])" not in help_of("demo")


def test_init_writes_the_example_config_once(tmp_path, capsys):
    target = tmp_path / "firstfault.toml"
    rc, out, _ = run(capsys, "init", str(target))
    assert rc == 0 and str(target) in out
    assert target.read_text() == (REPO / "firstfault" / "firstfault.example.toml").read_text()
    assert load_config(str(target)) == Config()
    rc, _, err = run(capsys, "init", str(target))
    assert rc == 2 and err.strip() == f"firstfault: {target}: already exists (--force replaces it)"
    assert run(capsys, "init", str(target), "--force")[0] == 0


@pytest.mark.parametrize("line, expected", [
    ("firstfault ", {"demo", "nightly", "rules", "init", "completion", "--version", "-q"}),
    ("firstfault rules ", {"test", "lint"}),
    ("firstfault rules lint --", {"--json", "--patterns", "--config"}),
    ("firstfault sql --format ", {"table", "csv", "json"}),
    ("firstfault nightly --ru", {"--runner"}),
    ("firstfault completion ", {"bash", "zsh"}),
])
def test_bash_completion_completes_commands_options_and_choices(capsys, line, expected):
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    words = line.split(" ")
    probe = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
             "_firstfault; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert expected <= set(done.stdout.split()), done.stdout


def test_bash_completion_says_where_it_goes_on_a_fresh_system(capsys):
    assert main(["completion", "bash"]) == 0
    header = [line for line in capsys.readouterr().out.splitlines() if line.startswith("#")]
    assert any("mkdir -p ~/.local/share/bash-completion/completions" in line for line in header)
    assert any("source <(firstfault completion bash)" in line for line in header)


def test_zsh_completion_loads_the_bash_function(capsys):
    assert main(["completion", "zsh"]) == 0
    script = capsys.readouterr().out
    assert "bashcompinit" in script and "complete -o default -F _firstfault firstfault" in script


def test_rules_test_and_lint_print_json(tmp_path, capsys):
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    text = (BUILTIN_FIXTURES / "segfault.yaml").read_text()
    (fixtures / "segfault.yaml").write_text(text.replace("      subdomain: nccl\n", "      subdomain: driver\n", 1))
    rc, out, _ = run(capsys, "rules", "test", str(fixtures), "--json")
    result = json.loads(out)
    assert rc == 1 and result["failed"] == 1 and result["passed"] == len(result["cases"]) - 1
    failed = [c for c in result["cases"] if not c["passed"]]
    assert failed[0]["case"] == "segfault::segfault_inside_libnccl_points_at_nccl"
    assert any("expected 'driver'" in p for p in failed[0]["problems"])
    rc, out, _ = run(capsys, "rules", "lint", "--json")
    result = json.loads(out)
    assert rc == 0 and result == {"ok": True, "problems": [], "summary": result["summary"]} and "rules" in result["summary"]


# --- progress, -q and -v ---------------------------------------------------------------------------------------------

class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_redraws_one_line_on_a_terminal_and_prints_a_summary():
    terminal = FakeTerminal()
    progress.enable(True)
    try:
        stage = progress.Stage("nightly 2026-11-29: land + attribute", 4, "attempts", stream=terminal)
        stage._drawn = -1.0  # draw now
        stage.advance(1, 2_500_000)
        assert "\r" in terminal.getvalue() and "1/4 attempts, 2.5 MB" in terminal.getvalue() and "ETA" in terminal.getvalue()
        stage.advance(3)
        stage.close(ok=True)
    finally:
        progress.enable(False)
    assert terminal.getvalue().endswith("\r\x1b[Knightly 2026-11-29: land + attribute: 4 attempts, 2.5 MB in 0.0 s\n")
    piped = io.StringIO()
    quiet = progress.Stage("land", 2, "attempts", stream=piped)
    quiet.advance(2)
    quiet.close(ok=True)
    assert piped.getvalue() == ""  # off unless the CLI turns it on


def test_simulate_prints_one_summary_line_per_stage_and_none_with_q(tmp_path, capsys):
    rc, out, err = run(capsys, "simulate", "--nodes", "8", "--attempts", "3", "--out", str(tmp_path / "a"))
    assert rc == 0 and "wrote 3 attempts" in out
    assert err.startswith("simulate: write: 3 attempts in ") and len(err.splitlines()) == 1
    rc, out, err = run(capsys, "-q", "simulate", "--nodes", "8", "--attempts", "3", "--out", str(tmp_path / "b"))
    assert rc == 0 and err == ""
    rc, out, err = run(capsys, "simulate", "-q", "--nodes", "8", "--attempts", "3", "--out", str(tmp_path / "c"))
    assert rc == 0 and err == ""


def test_verbose_shows_info_lines_and_quiet_hides_warnings(tmp_path, capsys):
    import logging

    warehouse = tmp_path / "w.duckdb"
    duckdb.connect(str(warehouse)).close()
    query = ["sql", "SELECT 1", "--format", "csv", "--warehouse", str(warehouse)]
    log = logging.getLogger("firstfault.connectors.http")
    try:
        assert main(["-v", *query]) == 0
        log.info("retry 1 in 0.5 s")
        assert "firstfault: INFO: retry 1 in 0.5 s" in capsys.readouterr().err
        assert main([*query, "-q"]) == 0
        log.warning("careful")
        assert "careful" not in capsys.readouterr().err
        assert main(query) == 0
        log.info("not shown")
        log.warning("shown")
        err = capsys.readouterr().err
        assert "not shown" not in err and "firstfault: WARNING: shown" in err
    finally:
        logging.getLogger("firstfault").setLevel(logging.NOTSET)


# --- usage errors: one line naming the argument, exit 2 ---------------------------------------------------------------

def usage_error(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_a_mistyped_command_is_one_line_with_the_close_match(capsys):
    err = usage_error(capsys, "atribute", "--static", "x.yaml")
    assert err.startswith("firstfault: ") and "'atribute'" in err and "did you mean 'attribute'?" in err
    assert "did you mean" not in usage_error(capsys, "zzzz")
    assert "did you mean 'test'?" in usage_error(capsys, "rules", "tset")


def test_a_usage_error_of_a_subcommand_is_one_line_naming_the_argument(capsys):
    err = usage_error(capsys, "attribute", "--static", "x.yaml", "--slurm", "42")
    assert err.startswith("firstfault attribute: ") and "--slurm" in err and "--static" in err and "--help" in err
    err = usage_error(capsys, "sql", "SELECT 1", "--format", "xml")
    assert err.startswith("firstfault sql: ") and "--format" in err and "'xml'" in err
    err = usage_error(capsys, "simulate")
    assert err.startswith("firstfault simulate: ") and "--out" in err


def test_help_shows_no_default_for_flags():
    text = " ".join(_parser().format_help().split())
    assert "-q, --quiet print errors and results only: no progress, no warnings -v" in text
    assert "(default: 0)" not in text and "(default: False)" not in text


def test_verbose_attribute_and_nightly_print_info_lines(demo_dir, tmp_path, capsys):
    import logging

    spec = str(demo_dir / "attempts" / "time-limit" / "attempt.yaml")
    where = ["--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake")]
    try:
        rc, _, quiet_err = run(capsys, "attribute", "--static", spec, *where)
        assert rc == 0 and "INFO" not in quiet_err
        rc, _, err = run(capsys, "attribute", "-v", "--static", spec, *where)
        assert rc == 0
        info = [line for line in err.splitlines() if line.startswith("firstfault: INFO: ")]
        assert any("demo/demo-time-limit/0" in line and "lines" in line for line in info), err
        assert any(str(tmp_path / "w.duckdb") in line for line in info), err
        rc, _, err = run(capsys, "-v", "nightly", "--date", "2026-11-29", "--catalog", str(demo_dir / "attempts" / "time-limit"),
                         "--prefect", "never", *where)
        assert rc == 0
        info = [line for line in err.splitlines() if line.startswith("firstfault: INFO: ")]
        assert any("1 found" in line for line in info) and any(str(tmp_path / "w.duckdb") in line for line in info), err
    finally:
        logging.getLogger("firstfault").setLevel(logging.NOTSET)
