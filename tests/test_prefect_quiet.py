"""firstfault's temporary Prefect server runs with analytics and telemetry off (the product sets it, not the
environment), and a successful Prefect run prints nothing on stderr: no telemetry heartbeat traceback, no info
lines unless -v."""
import os
import subprocess
import sys

from firstfault.flows import PREFECT_DEFAULTS


def clean_env(tmp_path) -> dict:
    """No Prefect or tracking variable of the calling environment: only what firstfault sets itself."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "PREFECT_HOME": str(tmp_path / "prefect")}


def test_importing_the_flows_sets_the_defaults_before_prefect_and_the_user_wins(tmp_path):
    probe = ("import os, sys, firstfault.flows\n"
             "assert 'prefect' not in sys.modules\n"
             "print(os.environ['PREFECT_SERVER_ANALYTICS_ENABLED'], os.environ['DO_NOT_TRACK'])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=clean_env(tmp_path), timeout=60)
    assert done.stdout.split() == ["false", "1"], done.stderr
    assert PREFECT_DEFAULTS["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={**clean_env(tmp_path), "DO_NOT_TRACK": "0"})
    assert done.stdout.split() == ["false", "0"], done.stderr


def test_a_successful_prefect_run_prints_nothing_on_stderr(demo_dir, tmp_path):
    spec = demo_dir / "attempts" / "headline" / "attempt.yaml"
    done = subprocess.run([sys.executable, "-m", "firstfault.cli", "attribute", "--static", str(spec), "--prefect", "always",
                           "--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake")],
                          capture_output=True, text=True, env=clean_env(tmp_path), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "demo/demo-headline/0  attributed" in done.stdout
    assert done.stderr == "", done.stderr


def test_a_nightly_prefect_flow_prints_only_its_progress_lines_on_stderr(demo_dir, tmp_path):
    done = subprocess.run([sys.executable, "-m", "firstfault.cli", "nightly", "--prefect", "always", "--date", "2026-11-29",
                           "--catalog", str(demo_dir / "attempts"), "--warehouse", str(tmp_path / "w.duckdb"),
                           "--lake", str(tmp_path / "lake")],
                          capture_output=True, text=True, env=clean_env(tmp_path), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "attributed 9" in done.stdout
    stages = [line.split(": ")[:2] for line in done.stderr.splitlines()]  # one summary line per stage, nothing else
    assert stages == [["nightly", "discover"], ["nightly 2026-11-29", "land + attribute"],
                      ["nightly 2026-11-29", "load into the warehouse"]], done.stderr
    assert " MB in " in done.stderr.splitlines()[1]
