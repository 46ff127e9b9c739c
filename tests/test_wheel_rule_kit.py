"""`firstfault rules test|lint` from an installed wheel, outside any checkout: the built-in rules ship with their
fixtures (rules_sql/*.yaml) and the files those read."""
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from firstfault.rules_sql.engine import load_rules

REPO = Path(__file__).parents[1]


def copy_sources(target: Path) -> None:
    """What the wheel is built from (pyproject.toml, its readme, the package folders), and nothing else: a checkout's
    build/ would be reused, and setuptools keeps files there that the source no longer has."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    target.mkdir()
    for name in ("pyproject.toml", project["project"]["readme"]):
        shutil.copy(REPO / name, target / name)
    for folder in set(project["tool"]["setuptools"]["package-dir"].values()):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))


def test_rules_test_and_lint_run_from_an_installed_wheel(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"TMPDIR": str(tmp_path / "tmp")}

    def run(*cmd):  # from tmp_path: outside the checkout, no firstfault.toml
        return subprocess.run([str(c) for c in cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    source = tmp_path / "source"
    copy_sources(source)
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path / "dist", source)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("firstfault-*.whl")

    # A fresh venv with only the wheel; its dependencies resolve from this venv's site-packages through a .pth line
    # (a folder added that way has its own .pth files ignored, so the editable install of the checkout stays out).
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "deps.pth").write_text("".join(f"{d}\n" for d in deps))
    installed = run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", wheel)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    where = run(python, "-c", "import firstfault; print(firstfault.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout + where.stderr

    tested = run(venv / "bin" / "firstfault", "rules", "test")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")
    rules = load_rules()
    for rule in rules:
        assert f"PASS {rule.id}::" in tested.stdout, rule.id

    linted = run(venv / "bin" / "firstfault", "rules", "lint")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert linted.stdout.startswith(f"ok: {len(rules)} rules ")
