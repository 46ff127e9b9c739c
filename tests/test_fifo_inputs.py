"""A FIFO or a device where a file should be is refused without waiting for a writer: `--static FIFO` is exit 2 and one
line, a FIFO named `*.yaml` in a catalog is a `run_failures` row of a night that goes on, a FIFO named like a log,
metrics file or flight-recorder dump is a connector report."""
import os
import subprocess
import sys

import duckdb
import yaml

from test_nightly import DAY, make_catalog

TIMEOUT = 60


def firstfault(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return subprocess.run([sys.executable, "-m", "firstfault.cli", *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT)


def test_a_fifo_or_device_as_static_context_is_refused(tmp_path):
    fifo = tmp_path / "attempt.yaml"
    os.mkfifo(fifo)
    for spec in (str(fifo), "/dev/zero"):
        done = firstfault("attribute", "--static", spec, "--lake", str(tmp_path / "lake"))
        assert done.returncode == 2 and done.stderr == f"firstfault: {spec}: not a regular file (a device, a pipe or a folder)\n"


def test_a_fifo_in_a_catalog_is_a_failure_row_and_the_night_goes_on(tmp_path):
    catalog = make_catalog(tmp_path, ["headline"])
    os.mkfifo(catalog / "stuck.yaml")
    (catalog / "more").mkdir()
    os.mkfifo(catalog / "more" / "attempt.yml")
    warehouse = str(tmp_path / "w.duckdb")
    for where in (str(catalog), str(catalog / "*" / "*.yml")):
        done = firstfault("nightly", "--date", DAY, "--catalog", where, "--lake", str(tmp_path / "lake"), "--warehouse", warehouse,
                          "--prefect", "never", "--force")
        assert done.returncode == 0, done.stderr
    con = duckdb.connect(warehouse, read_only=True)
    failures = con.execute("SELECT spec_uri, stage, error FROM run_failures ORDER BY ALL").fetchall()
    attributed = con.execute("SELECT attempt_id FROM attributions").fetchall()
    con.close()
    reason = "not a regular file (a device, a pipe or a folder)"
    more, stuck = str(catalog / "more" / "attempt.yml"), str(catalog / "stuck.yaml")
    # the folder run finds both FIFOs, the glob run the one it matches
    assert failures == [(more, "spec", f"{more}: {reason}")] * 2 + [(stuck, "spec", f"{stuck}: {reason}")]
    assert attributed == [("demo/demo-headline/0",)]


def test_fifos_named_as_inputs_are_reported_not_read(tmp_path):
    for name in ("node-01.log", "metrics.csv", "_dump_0"):
        os.mkfifo(tmp_path / name)
    spec = tmp_path / "attempt.yaml"
    spec.write_text(yaml.safe_dump({"workload_id": "w", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z",
                                    "nodes": ["node-01"], "logs": [{"path": "node-01.log"}], "metrics": ["metrics.csv"],
                                    "flight_recorder": ["_dump_*"]}))
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    done = firstfault("attribute", "--static", str(spec), *args)
    assert done.returncode == 0, done.stderr
    reports = firstfault("sql", *args, "--format", "csv", "SELECT connector, status, reason FROM connector_reports "
                         "WHERE status <> 'ok' ORDER BY connector, reason")
    assert reports.stdout.count("not a regular file") == 3, reports.stdout
