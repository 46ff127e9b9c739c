"""The README's test command (scripts/setup-and-test.sh) lists the 20 slowest tests, and pytest's summary line stays
the last line of the run (CI reads it)."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pytest_command() -> list[str]:
    lines = [l for l in (REPO / "scripts" / "setup-and-test.sh").read_text().splitlines() if " -m pytest " in l]
    assert len(lines) == 1, lines
    return lines[0].split(" -m pytest ", 1)[1].split('"$@"')[0].split()


def test_the_test_command_lists_the_slowest_20_tests_before_its_summary_line(tmp_path):
    options = pytest_command()
    assert "--durations=20" in options
    (tmp_path / "test_two.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", *options, "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    lines = done.stdout.rstrip("\n").splitlines()
    assert done.returncode == 0, done.stdout
    assert any("slowest 20 durations" in l for l in lines), done.stdout
    assert re.fullmatch(r"2 passed in [\d.]+s", lines[-1]), lines[-1]
