"""The Slurm connector against a real one-node cluster with accounting (scripts/slurm-up.sh; scripts/setup-and-test.sh starts it).

Three jobs are submitted at once: one killed by its time limit (fast path: `--time=1`, then `TimeLimit=0` once
step .0 runs; it ends at the controller's next 30 s sweep), one whose srun step dies with a Python traceback, and
one requeued once (fast path: requeue, then `StartTime=now` once it is PENDING again). When their accounting records
are final, `firstfault attribute --slurm` and a nightly run must attribute them. Never skipped: without a running
cluster the session fixture starts one, without the Slurm packages the tests fail and say what to install.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from conftest import warehouse_rows

from firstfault.cli import main
from firstfault.config import load_config
from firstfault.connectors.slurm import SlurmConnector
from firstfault.nightly import run_nightly

REPO = Path(__file__).resolve().parents[1]
PACKAGES = "slurmctld slurmd slurm-client slurmdbd munge mariadb-server"
TOOLS = ("sbatch", "sacct", "scontrol", "squeue", "sacctmgr", "slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd")
FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
TRACEBACK_JOB = """#!/bin/bash
srun python3 -c '
def load(): raise RuntimeError("simulated failure in load()")
print("loading", flush=True)
load()
'
"""
REQUEUE_JOB = """#!/bin/bash
echo "run ${SLURM_RESTART_COUNT:-0}"
if [ "${SLURM_RESTART_COUNT:-0}" -eq 0 ]; then srun sleep 600; fi
srun echo "second run ok"
"""


def run(*command: str, timeout: float = 30) -> str:
    # TZ=UTC: the times sacct prints are then UTC
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout, env={**os.environ, "TZ": "UTC"})
    if done.returncode:
        raise AssertionError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def wait_for(what: str, check, timeout: float, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def cluster_ready() -> bool:
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False, timeout=10)
        dbd = subprocess.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"], capture_output=True, text=True, check=False, timeout=10)
        node = subprocess.run(["sinfo", "-h", "-n", "node1", "-o", "%T"], capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "UP" in ping.stdout and dbd.returncode == 0 and bool(dbd.stdout.strip()) and node.stdout.strip() in ("idle", "mixed", "allocated")


@pytest.fixture(scope="session")
def slurm_cluster():
    """The running cluster, or one started here (and stopped at the end) with scripts/slurm-up.sh."""
    search = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [t for t in TOOLS if shutil.which(t, path=search) is None]
    if missing:
        pytest.fail(f"the Slurm packages are not installed ({', '.join(missing)} not found); install them as .ci/run does: "
                    f"apt-get install -y --no-install-recommends {PACKAGES}", pytrace=False)
    if cluster_ready():
        yield
        return
    state_dir = tempfile.mkdtemp(prefix="firstfault-slurm.")  # under TMPDIR: its parents must be traversable by slurm and mysql
    env = {**os.environ, "PATH": search, "STATE_DIR": state_dir}
    up = subprocess.run(["bash", str(REPO / "scripts" / "slurm-up.sh")], env=env, capture_output=True, text=True, check=False, timeout=300)
    if up.returncode:
        pytest.fail(f"scripts/slurm-up.sh failed ({up.returncode}):\n{up.stdout}{up.stderr}", pytrace=False)
    try:
        yield
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-down.sh")], env=env, capture_output=True, check=False, timeout=300)
        shutil.rmtree(state_dir, ignore_errors=True)  # the database alone is ~180 MB


def sacct_rows(job_id: str) -> tuple[str, list[list[str]]]:
    out = run("sacct", "-j", job_id, "--duplicates", "-P", "-n", "-o", "JobID,JobName,State,ExitCode,Start,End")
    return out, [line.split("|") for line in out.splitlines() if line]


def wait_final(job_ids: list[str], timeout: float = 75.0, settle: float = 2.0) -> None:
    """Until each job's newest run is final in accounting, no row is the `allocation` placeholder (the full job row
    arrives on a 5 s cadence, sometimes after the end) and sacct's answer has not changed for `settle` seconds."""
    last: dict[str, tuple[str, float]] = {}

    def settled(job_id: str) -> bool:
        out, rows = sacct_rows(job_id)
        runs = [r for r in rows if r[0] == job_id]
        if not runs or runs[-1][2].split()[0] not in FINAL or any(r[1] == "allocation" for r in runs):
            return False
        if last.get(job_id, ("",))[0] != out:
            last[job_id] = (out, time.monotonic())
        return time.monotonic() - last[job_id][1] >= settle

    # a list, not a generator: every job's answer is looked at on every poll, so each settles on its own clock
    wait_for(f"final accounting records of jobs {', '.join(job_ids)}", lambda: all([settled(j) for j in job_ids]), timeout, every=0.5)  # noqa: C419


def controller_state(job_id: str) -> str:
    return run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").strip()


def has_step_zero(job_id: str) -> bool:
    return f"{job_id}.0" in run("squeue", "-h", "-s", "-j", job_id, "-o", "%i").split()


def time_out(job_id: str) -> None:
    # new steps are refused once the limit is 0, so the srun step must run first
    wait_for(f"step {job_id}.0", lambda: has_step_zero(job_id), 60)
    run("scontrol", "update", f"JobId={job_id}", "TimeLimit=0")


def requeue_once(job_id: str) -> None:
    wait_for(f"step {job_id}.0", lambda: has_step_zero(job_id), 60)
    run("scontrol", "requeue", job_id)
    # requeue is asynchronous: only a PENDING job takes the new start time; a start within the second of the
    # requeue is refused (its launch credential counts as revoked)
    wait_for(f"job {job_id} pending again", lambda: controller_state(job_id) == "PENDING", 30)
    time.sleep(1.2)
    run("scontrol", "update", f"JobId={job_id}", "StartTime=now")


@pytest.fixture(scope="module")
def jobs(slurm_cluster, tmp_path_factory):
    """Submit the three jobs together, drive the time limit and the requeue, and wait for final records."""
    workdir = tmp_path_factory.mktemp("slurm-jobs")
    (workdir / "traceback.sbatch").write_text(TRACEBACK_JOB)
    (workdir / "requeue.sbatch").write_text(REQUEUE_JOB)
    started = time.monotonic()
    common = ["sbatch", "--parsable", f"--chdir={workdir}", "--output=%x-%j.out"]
    ids = {
        "timeout": run(*common, "--job-name=ff-live-timeout", "--time=1", "--gres=gpu:h100:1", "--wrap", "echo start; srun sleep 600"),
        "traceback": run(*common, "--job-name=ff-live-traceback", "--gres=gpu:h100:1", str(workdir / "traceback.sbatch")),
        "requeue": run(*common, "--job-name=ff-live-requeue", "--requeue", "--open-mode=append", str(workdir / "requeue.sbatch")),
    }
    ids = {k: v.strip().split(";")[0] for k, v in ids.items()}
    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(time_out, ids["timeout"]), pool.submit(requeue_once, ids["requeue"])]:
            future.result()
    wait_final(list(ids.values()))
    print(f"slurm jobs {ids} final in accounting after {time.monotonic() - started:.1f} s")
    return ids, workdir


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm-firstfault")
    path = root / "firstfault.toml"
    path.write_text(f'[slurm]\nenabled = true\n\n[lake]\nroot = "{root / "lake"}"\n\n[warehouse]\npath = "{root / "wh.duckdb"}"\n')
    return path


def attribute(config_file: Path, ref: str, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["attribute", "--slurm", ref, "--json", "--config", str(config_file), "--prefect", "never"]) == 0
    out = capsys.readouterr().out
    try:
        return [json.loads(out)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_time_limit(jobs, config_file, capsys):
    ids, _ = jobs
    [verdict] = attribute(config_file, ids["timeout"], capsys)
    assert (verdict["attempt_id"], verdict["state"]) == (f"ci/{ids['timeout']}/0", "TIMEOUT")
    assert (verdict["verdict"], verdict["domain"], verdict["subdomain"]) == ("attributed", "infrastructure", "time_limit")
    [context] = (Path(load_config(str(config_file)).lake.root) / "contexts").glob(f"day=*/ci~2F{ids['timeout']}~2F0.json")
    saved = json.loads(context.read_text())
    assert (saved["gpu_model"], saved["gpus_per_node"], saved["nodes"]) == ("H100", 1, ["node1"])
    assert (saved["scheduler"]["step"], saved["scheduler"]["step_state"], saved["scheduler"]["step_exit_code"]) == ("0", "CANCELLED", "0:15")


def test_python_traceback(jobs, config_file, capsys):
    ids, workdir = jobs
    [verdict] = attribute(config_file, f"{ids['traceback']}:0", capsys)
    assert (verdict["state"], verdict["verdict"], verdict["domain"], verdict["subdomain"]) == ("FAILED", "attributed", "application", "exception")
    assert "simulated failure in load()" in verdict["root_cause"]["summary"]
    output = (workdir / f"ff-live-traceback-{ids['traceback']}.out").as_uri()
    assert any(e["uri"] == output for e in verdict["evidence"])


def test_requeued_job_is_two_attempts(jobs, config_file, capsys):
    ids, _ = jobs
    first, second = attribute(config_file, ids["requeue"], capsys)
    assert [(v["attempt"], v["state"]) for v in (first, second)] == [(0, "REQUEUED"), (1, "COMPLETED")]
    assert second["verdict"] == "not_failed"


def test_json_output_of_22_05_gets_exit_codes_from_text(jobs):
    ids, _ = jobs
    connector = SlurmConnector(replace(load_config(None).slurm, enabled=True, json=True))
    [ctx] = connector.resolve(ids["traceback"])
    assert ctx.exit_code == "1:0" and ctx.scheduler["step_exit_code"] == "1:0"


def test_nightly_discovers_and_attributes_them(jobs, tmp_path):
    ids, _ = jobs
    config = load_config(None)
    config = replace(config, slurm=replace(config.slurm, enabled=True),
                     lake=replace(config.lake, root=str(tmp_path / "lake")),
                     warehouse=replace(config.warehouse, path=str(tmp_path / "wh.duckdb")))
    # the UTC day the jobs ended on (not the wall clock: the test may run across midnight)
    day = datetime.fromisoformat(run("sacct", "-X", "-n", "-P", "-j", ids["traceback"], "-o", "End").strip()).date()
    summary = run_nightly(config, day)
    ours = {f"ci/{ids['timeout']}/0", f"ci/{ids['traceback']}/0", f"ci/{ids['requeue']}/0", f"ci/{ids['requeue']}/1"}
    assert ours <= set(summary["attempt_ids"])
    assert not [f for f in summary["failures"] if f["attempt_id"] in ours]
    rows = warehouse_rows(config.warehouse.path, "SELECT attempt_id, verdict, domain, subdomain FROM attributions")
    got = {r["attempt_id"]: (r["verdict"], r["domain"], r["subdomain"]) for r in rows if r["attempt_id"] in ours}
    assert got[f"ci/{ids['timeout']}/0"] == ("attributed", "infrastructure", "time_limit")
    assert got[f"ci/{ids['traceback']}/0"] == ("attributed", "application", "exception")
    assert got[f"ci/{ids['requeue']}/1"][0] == "not_failed"
