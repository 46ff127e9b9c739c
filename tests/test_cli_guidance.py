"""The command line points the user at what they meant: a mistyped option names the closest one, a missing warehouse
names the config that was (or was not) read, help text says what docs/cli.md and docs/automation.md say."""
import pytest

from firstfault.cli import main


def usage_error(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


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
