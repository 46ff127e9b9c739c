"""The command line points the user at what they meant: a mistyped option names the closest one, a missing warehouse
names the config that was (or was not) read, help text says what docs/cli.md and docs/automation.md say."""
import shlex
from pathlib import Path

import pytest

from firstfault.cli import main
from test_cli_operator import usage_error


@pytest.mark.parametrize("args, expected", [
    (("sql", "SELECT 1", "--fromat", "csv"), "firstfault sql: unrecognized argument '--fromat': did you mean '--format'?"),
    # the unknown option, not the required group it leaves unset
    (("attribute", "--statik", "x.yaml"), "firstfault attribute: unrecognized argument '--statik': did you mean '--static'?"),
    (("--vrebose", "demo"), "firstfault: unrecognized argument '--vrebose': did you mean '--verbose'?"),
    (("fleet", "rebuild", "--topolgy=t.yaml"), "firstfault fleet rebuild: unrecognized argument '--topolgy': did you mean '--topology'?"),
    (("rules", "--test"), "firstfault rules: unrecognized argument '--test': did you mean 'test'?"),
])
def test_a_mistyped_option_names_the_closest_one(capsys, args, expected):
    assert usage_error(capsys, *args).startswith(expected)


def test_known_spellings_stay_valid(capsys):
    # an abbreviation of a long option, a negative number and a value after `--` are not mistyped options
    assert "did you mean" not in usage_error(capsys, "sql", "SELECT 1", "--form", "xml")
    assert "unrecognized argument" not in usage_error(capsys, "simulate", "--out", "x", "--seed", "-1", "--nodes", "x")
    assert "atribute" in usage_error(capsys, "atribute", "--statik", "x.yaml")  # the command first: its options are unknown


# --- which config: --config, FIRSTFAULT_CONFIG, ./firstfault.toml, the demo's -----------------------------------------

@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An empty current folder, FIRSTFAULT_CONFIG unset."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FIRSTFAULT_CONFIG", raising=False)
    return tmp_path


def demo_config(root: Path, mark: int) -> Path:
    """What `firstfault demo --dir ROOT` leaves behind for the commands that read it: its config and a warehouse
    (with a table `mark` telling it from another)."""
    from firstfault.synthetic.demo import write_demo_config
    from firstfault.warehouse.store import connect_writer

    root.mkdir()
    config = write_demo_config(root.resolve())
    con = connect_writer(str(root / "firstfault.duckdb"))
    con.execute(f"CREATE TABLE mark AS SELECT {mark} AS n")
    con.close()
    return config


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main(list(args))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


COUNT = ("sql", "SELECT n FROM mark", "--format", "csv")


def test_after_the_demo_sql_report_and_actions_read_its_config(folder, capsys):
    demo_config(folder / "firstfault-demo", 3)
    rc, out, err = run(capsys, *COUNT)
    assert (rc, out) == (0, "n\r\n3\r\n"), err
    assert "firstfault: config firstfault-demo/firstfault.toml (written by `firstfault demo`" in err
    rc, out, err = run(capsys, "-q", *COUNT)
    assert (rc, out, err) == (0, "n\r\n3\r\n", "")
    rc, _, err = run(capsys, "report", "--out", str(folder / "report"))
    assert rc == 0 and (folder / "report" / "index.html").is_file(), err
    rc, out, err = run(capsys, "actions", "--format", "csv")
    assert rc == 0 and out.startswith("action_id,"), err


def test_firstfault_config_names_the_config_and_wins_over_the_demo(folder, capsys, monkeypatch):
    demo_config(folder / "firstfault-demo", 3)
    monkeypatch.setenv("FIRSTFAULT_CONFIG", str(demo_config(folder / "elsewhere", 5)))
    rc, out, err = run(capsys, *COUNT)
    assert (rc, out, err) == (0, "n\r\n5\r\n", "")


def test_a_missing_warehouse_says_which_config_was_read_or_that_none_was(folder, capsys):
    rc, _, err = run(capsys, *COUNT)
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("firstfault: ./firstfault.duckdb: field 'warehouse': no such DuckDB file, and no config file was "
                          "read (none given with --config or FIRSTFAULT_CONFIG, no ./firstfault.toml)"), err
    demo_config(folder / "a", 1)
    demo_config(folder / "b", 2)
    rc, _, err = run(capsys, *COUNT)  # two demos: which one is meant is the user's to say
    assert rc == 2 and "`firstfault demo` wrote a/firstfault.toml and b/firstfault.toml: pass one with --config" in err
    (folder / "firstfault.toml").write_text('[warehouse]\npath = "gone.duckdb"\n')
    rc, _, err = run(capsys, *COUNT)
    assert rc == 2 and "gone.duckdb: field 'warehouse': no such DuckDB file ([warehouse] path of firstfault.toml)" in err


def test_actions_without_a_warehouse_is_bad_input_like_sql_and_report(folder, capsys):
    for command in (["actions"], ["actions", "resume", "7"], ["sql", "SELECT 1"], ["report"], ["fleet", "rebuild"]):
        rc, out, err = run(capsys, *command, "--warehouse", str(folder / "none.duckdb"))
        assert (rc, out) == (2, ""), command
        assert err.strip() == f"firstfault: {folder / 'none.duckdb'}: field 'warehouse': no such DuckDB file: run " \
                              "`firstfault demo` or `attribute` first", command


# --- firstfault api --------------------------------------------------------------------------------------------------

def test_api_without_a_config_file_says_no_file_was_read(folder, capsys):
    rc, _, err = run(capsys, "api")
    assert rc == 2 and err.count("\n") == 1
    assert "firstfault.toml: field" not in err, "names a file that does not exist"
    assert err.startswith("firstfault: --config: no token: no config file was read (none given with --config or "
                          "FIRSTFAULT_CONFIG, no ./firstfault.toml) to set [api] token_env or token_file"), err


class Served(BaseException):
    """The server would start now: every check before it passed."""


def test_the_api_help_example_starts_a_server(folder, capsys, monkeypatch):
    import firstfault.api
    from firstfault.cli import EXAMPLES

    demo_config(folder / "firstfault-demo", 1)
    etc = folder / "etc"
    etc.mkdir()
    (etc / "firstfault.toml").write_text('[api]\ntoken_env = "FIRSTFAULT_API_TOKEN"\n')
    monkeypatch.setenv("FIRSTFAULT_API_TOKEN", "secret")

    def served(*args, **kwargs):
        raise Served()

    monkeypatch.setattr(firstfault.api, "create_app", served)
    for line in EXAMPLES["api"].splitlines():
        args = shlex.split(line.split("#")[0].replace("/etc/firstfault/", f"{etc}/"))
        assert args[:2] == ["firstfault", "api"], line
        with pytest.raises(Served):
            main(args[1:])


# --- help text says what the docs say --------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


def commands():
    import argparse

    from firstfault.cli import _parser

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield (*path, name), sub
                    yield from walk(sub, (*path, name))
    return dict(walk(_parser(), ()))


def placeholder(action) -> str:
    return "|".join(action.choices) if action.choices else action.metavar or action.dest.upper()


def documented_placeholders() -> dict[tuple[str, ...], dict[str, str]]:
    """Per command of docs/cli.md (its `## firstfault …` section), each option written with its placeholder."""
    import re

    found = {}
    for section in (REPO / "docs" / "cli.md").read_text().split("\n## `firstfault ")[1:]:
        words = section.split("`")[0].split()
        names = [w for w in words if w.islower()]
        paths = [(names[0], *sub.split("|")) for sub in names[1:2]] or [(names[0],)]
        paths = [tuple(p) for sub in paths for p in ([sub] if len(sub) < 2 else [(sub[0], s) for s in sub[1:]])]
        # an option table's first cell (`--opt X`, `--opt X`), a synopsis line (firstfault … [--opt X])
        cells = [line.split(" | ")[0] for line in section.replace("\\|", "|").splitlines() if line.startswith("| `")]
        synopses = [line for line in section.splitlines() if line.startswith("firstfault ")]
        written = dict(re.findall(r"`(--[a-z-]+) ([^`\s]+)`", " ".join(cells))
                       + re.findall(r"\[(--[a-z-]+) ([^\]\s]+)\]", " ".join(synopses)))
        for path in paths:
            found[path] = written
    return found


def test_every_placeholder_in_help_is_the_one_docs_cli_writes():
    docs = documented_placeholders()
    mismatches = []
    for path, parser in commands().items():
        written = docs.get(path) or docs.get(path[:1], {})
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.help == "==SUPPRESS==":
                continue
            option = action.option_strings[-1]
            if option in written and written[option] != placeholder(action):
                mismatches.append((" ".join(path), option, placeholder(action), written[option]))
    assert not mismatches, mismatches


def test_a_day_is_given_with_date_everywhere_and_the_old_spelling_still_parses():
    from firstfault.cli import _parser

    visible = {o for parser in commands().values() for a in parser._actions if a.help != "==SUPPRESS==" for o in a.option_strings}
    assert "--date" in visible and "--day" not in visible
    for spelling in ("--date", "--day"):
        assert _parser().parse_args(["fleet", "rebuild", spelling, "2026-11-29"]).day == "2026-11-29"


def test_an_optional_subcommand_looks_optional_in_its_usage_line():
    usage = " ".join(commands()[("actions",)].format_usage().split())
    assert usage.endswith("[resume ...]"), usage


def test_help_examples_name_the_paths_docs_automation_uses():
    import re

    from firstfault.cli import EXAMPLES

    automation = (REPO / "docs" / "automation.md").read_text()
    for command in ("epilog", "worker", "actions", "actions resume"):
        paths = re.findall(r"/(?:etc|opt)/[\w./-]+", EXAMPLES[command])
        assert paths and all(p in automation for p in paths), (command, paths)
