"""A YAML file that does not parse is named with the line, the column and the problem, whatever reads it: a static
context, a catalogue file, a rule fixture, a pattern file, a topology file."""
import pytest

from firstfault.connectors.static_context import load_static_context
from firstfault.errors import BadInput
from firstfault.rules_sql.cases import load_cases
from firstfault.transforms.extract import PatternError, load_pattern_file
from firstfault.transforms.messages import load_catalogue
from firstfault.warehouse.fleet import load_topology

# the list opened on line 2 is never closed: the parser notices on line 3
UNCLOSED = "first: 1\nsecond: [a, b\nthird: 3\n"
WHERE = "not valid YAML: line 3, column 6: did not find expected ',' or ']' (while parsing a flow sequence started at line 2, column 9)"


def read_static(folder):
    return load_static_context(str(folder / "bad.yaml"))


def read_catalogue(folder):
    return load_catalogue(folder)


def read_fixtures(folder):
    return load_cases([folder])


def read_patterns(folder):
    return load_pattern_file(folder / "bad.yaml")


def read_topology(folder):
    return load_topology(str(folder / "bad.yaml"))


@pytest.mark.parametrize("read", [read_static, read_catalogue, read_fixtures, read_patterns, read_topology])
def test_a_yaml_syntax_error_names_line_column_and_problem(tmp_path, read):
    (tmp_path / "bad.yaml").write_text(UNCLOSED)
    with pytest.raises((BadInput, PatternError)) as raised:
        read(tmp_path)
    message = str(raised.value)
    assert message.startswith(str(tmp_path / "bad.yaml")) and message.endswith(WHERE), message
    assert "\n" not in message


def test_the_command_line_prints_the_place_in_one_line(tmp_path, capsys):
    from firstfault.cli import main

    spec = tmp_path / "attempt.yaml"
    spec.write_text("workload_id: w\nnodes:\n  - node-01\n  node-02\n")
    assert main(["attribute", "--static", str(spec), "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.strip().endswith(f"{spec}: not valid YAML: line 5, column 1: could not find expected ':' "
                                                    "(while scanning a simple key started at line 4, column 3)"), err
