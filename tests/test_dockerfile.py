"""The Dockerfile installs the way the tests do: both run scripts/install.sh (the README's set-up), and the image
serves the API on the demo it builds. Building the image is not tested here (no container daemon)."""
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(l for l in path.read_text().splitlines() if not l.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2)) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, re.M)]


def test_the_image_and_the_test_script_install_through_the_same_script():
    steps = instructions(REPO / "Dockerfile")
    assert steps[0] == ("FROM", "python:3.11-slim-bookworm")
    runs = [args for op, args in steps if op == "RUN"]
    assert any(re.match(r"bash scripts/install\.sh(\s|$)", r) for r in runs), runs
    setup = "\n".join(l for l in (REPO / "scripts" / "setup-and-test.sh").read_text().splitlines() if not l.lstrip().startswith("#"))
    assert re.search(r'^bash "\$REPO/scripts/install\.sh" --test', setup, re.M)
    # the install steps live in one place: neither caller creates a venv or runs pip itself
    for text in ["\n".join(runs), setup]:
        assert "pip install" not in text and "-m venv" not in text
    install = (REPO / "scripts" / "install.sh").read_text()
    assert '-m venv "$VENV"' in install and 'pip" install --quiet -e' in install


def test_the_image_serves_the_api_on_the_demo_it_builds():
    steps = instructions(REPO / "Dockerfile")
    runs = " ".join(args for op, args in steps if op == "RUN")
    assert "firstfault -q demo --dir /var/lib/firstfault/demo" in runs
    cmd = [args for op, args in steps if op == "CMD"][-1]
    assert '"api"' in cmd and '"0.0.0.0"' in cmd and "/var/lib/firstfault/demo/firstfault.duckdb" in cmd
    assert ("EXPOSE", "8080") in steps


def test_the_scripts_parse():
    for script in ("install.sh", "setup-and-test.sh"):
        done = subprocess.run(["bash", "-n", str(REPO / "scripts" / script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
