"""The scheduler loop against the real one-node Slurm cluster (scripts/slurm-up.sh): EpilogSlurmctld → `firstfault
epilog` → spool → worker → warehouse, webhook and the [actions] policy (docs/automation.md).

The cluster's EpilogSlurmctld runs `hook` beside it when that is executable: this module installs the hook only while
it runs (the other live tests' failing jobs queue nothing), and its finaliser resumes node1 and checks it is idle,
also when a test fails."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest
from conftest import warehouse_rows
from local_webhook import Receiver
from test_slurm_live import run, slurm_cluster, wait_final, wait_for  # noqa: F401  (slurm_cluster: a fixture)

from firstfault.cli import main
from firstfault.config import load_config
from firstfault.worker import Worker

REPO = Path(__file__).resolve().parents[1]
# a GPU that fell off the bus on the job's node (kernel log), then the training step dies
GPU_JOB = """#!/bin/bash
echo "$(date -u '+%b %e %H:%M:%S') node1 kernel: [4242.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus." >> kernel-node1.log
srun python3 -c '
import sys
print("step 10 loss 2.31", flush=True)
sys.stderr.write("RuntimeError: CUDA error: unspecified launch failure\\n")
sys.exit(1)
'
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_state() -> str:
    return run("sinfo", "-h", "-n", "node1", "-o", "%T").strip()


def resume_node1() -> None:
    subprocess.run(["scontrol", "update", "NodeName=node1", "State=RESUME"], capture_output=True, check=False, timeout=30)


def as_slurm_user(*command: str) -> bool:
    return subprocess.run(["runuser", "-u", "slurm", "--", *command], capture_output=True, check=False, timeout=60).returncode == 0


def epilog_command(config: Path) -> str:
    """How SlurmUser runs `firstfault epilog`: this environment's, when SlurmUser can run it; else (a venv or a
    checkout under /root is out of its reach) the same modules copied beside the config, under the system Python
    (the epilog's import path is the standard library and these files only)."""
    if as_slurm_user(sys.executable, "-c", "import firstfault.cli, firstfault.connectors.slurm_epilog"):
        return f"exec {sys.executable} -m firstfault.cli epilog --config {config}"
    code = config.parent / "epilog-code"
    if not code.exists():
        skip = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(REPO / "firstfault", code / "firstfault", ignore=skip)
        shutil.copytree(REPO / "connectors", code / "firstfault" / "connectors", ignore=skip)
    return f"PYTHONPATH={code} exec /usr/bin/python3 -P -m firstfault.cli epilog --config {config}"  # -P: not the cwd's firstfault


@pytest.fixture(scope="module")
def loop(slurm_cluster):  # noqa: F811
    """A folder SlurmUser can reach (spool writable by it), the epilog hook installed, node1 idle afterwards."""
    epilog = re.search(r"^EpilogSlurmctld\s*=\s*(\S+)", run("scontrol", "show", "config"), re.M)
    assert epilog and epilog.group(1) != "(null)", "the cluster has no EpilogSlurmctld: start it with scripts/slurm-up.sh"
    hook = Path(epilog.group(1)).parent / "hook"
    root = Path(tempfile.mkdtemp(prefix="firstfault-automation."))  # under TMPDIR: pytest's tmp_path is private to root
    root.chmod(0o755)
    (root / "spool").mkdir(mode=0o1777)
    (root / "spool").chmod(0o1777)
    config = root / "firstfault.toml"
    hook.write_text(f"#!/bin/sh\n{epilog_command(config)}\n")
    hook.chmod(0o755)
    try:
        yield root, config
    finally:
        hook.unlink(missing_ok=True)
        resume_node1()
        try:
            wait_for("node1 idle", lambda: node_state() == "idle", 60, every=0.5)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def write_config(root: Path, config: Path, name: str, *, webhook: str = "", actions: str = "", kernel_log: bool = True) -> None:
    """A fresh warehouse and lake per test; the spool is shared (the epilog hook reads this same file). The jobs'
    kernel log is a file in their folder (a job without one is retried until give_up_s: a missing source)."""
    logs = '{syslog = "{workdir}/kernel-{node}.log"}' if kernel_log else "{}"
    config.write_text(f"""
[slurm]
enabled = true
logs = {logs}

[lake]
root = "{root / name / 'lake'}"

[warehouse]
path = "{root / name / 'wh.duckdb'}"

[automation]
spool_dir = "{root / 'spool'}"
settle_s = 1.0
poll_s = 0.3
retry_s = 1.0
give_up_s = 45.0
outputs = ["jsonl:{root / name / 'verdicts.jsonl'}"]

[webhook]
url = "{webhook}"
timeout_s = 2.0
retries = 0

[actions]
{actions}
""")


@contextmanager
def running_worker(config: Path):
    """`firstfault worker` as the service runs it: its own process, stopped with SIGTERM."""
    log = config.parent / "worker.log"
    with open(log, "ab") as out:
        worker = subprocess.Popen([sys.executable, "-m", "firstfault.cli", "worker", "--config", str(config)], cwd=REPO,
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        yield Path(load_config(str(config)).automation.spool_dir) / "outbox"
        assert worker.poll() is None, f"the worker stopped: {log.read_text()}"
    finally:
        worker.terminate()
        worker.wait(60)


def submit(workdir: Path, name: str, script: str | None = None, wrap: str | None = None) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    command = ["sbatch", "--parsable", f"--chdir={workdir}", "--output=%x-%j.out", f"--job-name={name}", "--gres=gpu:h100:1"]
    if script is not None:
        (workdir / f"{name}.sbatch").write_text(script)
        command.append(str(workdir / f"{name}.sbatch"))
    else:
        command += ["--wrap", wrap]
    return run(*command).strip().split(";")[0]


def job_end(job_id: str) -> float:
    end = run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "End").strip()
    return datetime.fromisoformat(end).replace(tzinfo=timezone.utc).timestamp()


def rows_now(warehouse: Path, sql: str) -> list[dict]:
    """The query's rows, or none while the warehouse does not exist yet or the worker holds it for a write."""
    try:
        return warehouse_rows(str(warehouse), sql) if warehouse.exists() else []
    except duckdb.Error:
        return []


def actions_rows(warehouse: Path) -> list[dict]:
    return rows_now(warehouse, "SELECT * FROM actions ORDER BY action_id")


def queued(root: Path) -> list[Path]:
    return sorted((root / "spool" / "queue").glob("*.json"))


def test_a_failed_job_is_attributed_from_its_epilog_and_reaches_a_webhook_that_was_down(loop):
    root, config = loop
    port = free_port()  # nothing listens there yet: the webhook is down when the verdict is made
    write_config(root, config, "notify", webhook=f"http://127.0.0.1:{port}/hook")
    ok = submit(root / "notify", "ff-auto-ok", wrap="true")
    gpu = submit(root / "notify", "ff-auto-gpu", GPU_JOB)
    warehouse = root / "notify" / "wh.duckdb"
    receiver = None
    with running_worker(config) as outbox:
        wait_final([ok, gpu])
        attributed = wait_for("the verdict in the warehouse", lambda: rows_now(
            warehouse, "SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, action FROM attributions"), 60)
        assert [(r["attempt_id"], r["verdict"], r["domain"], r["culprit_nodes"], r["action"]) for r in attributed] == [
            (f"ci/{gpu}/0", "attributed", "hardware", ["node1"], "drain_node")]
        wait_for("a failed send in the outbox", lambda: [p for p in outbox.glob("*.json")
                                                         if json.loads(p.read_text()).get("tries")], 30)
        receiver = Receiver(port)
        try:
            wait_for("the webhook POST", lambda: receiver.posts, 60)
        finally:
            receiver.close()
    received_at, body = receiver.posts[0]
    print(f"job {gpu}: verdict at the webhook {received_at - job_end(gpu):.1f} s after the job's end")
    assert received_at - job_end(gpu) <= 60
    assert body["verdict"]["attempt_id"] == f"ci/{gpu}/0" and body["verdict"]["subdomain"] == attributed[0]["subdomain"]
    assert f"ci/{gpu}/0 attributed hardware/" in body["text"] and "culprit: node1" in body["text"] and "action: drain_node" in body["text"]
    assert "Xid (PCI:0000:3b:00): 79" in body["text"]
    lines = [json.loads(x) for x in (root / "notify" / "verdicts.jsonl").read_text().splitlines()]
    assert [v["attempt_id"] for v in lines] == [f"ci/{gpu}/0"]
    assert not queued(root) and not list(outbox.glob("*.json"))  # the successful job queued nothing
    assert len(receiver.posts) == 1


def scontrol_node() -> str:
    return run("scontrol", "--oneliner", "show", "node", "node1")


def with_actions(root: Path, config: Path, name: str, policy: str) -> Path:
    """Write the test's config with [actions] on (node1 is the whole cluster: any fraction allows it); its warehouse."""
    write_config(root, config, name, actions=f"enabled = true\nmax_fraction = 1.0\n{policy}")
    return root / name / "wh.duckdb"


def decisions(warehouse: Path, job: str) -> list[dict]:
    return wait_for(f"the decisions about job {job}", lambda: [r for r in actions_rows(warehouse) if r["attempt_id"] == f"ci/{job}/0"], 90)


def test_drain_then_resume_then_the_hourly_budget_holds(loop, capsys):
    root, config = loop
    warehouse = with_actions(root, config, "drain", "dry_run = false\nmax_nodes_per_hour = 1")
    with running_worker(config):
        job_a = submit(root / "drain", "ff-auto-a", GPU_JOB)
        [done] = decisions(warehouse, job_a)
        assert (done["attempt_id"], done["node"], done["status"], done["kind"], done["rule"]) == (f"ci/{job_a}/0", "node1", "done", "drain", "xid_root")
        shown = scontrol_node()
        assert "DRAIN" in re.search(r"State=(\S+)", shown).group(1)
        reason = re.search(r"Reason=(.*?) \[", shown).group(1)
        assert reason == done["reason"] and reason.startswith("firstfault: Xid 79") and reason.endswith(f"(ci/{job_a}/0)") and len(reason) <= 200

        capsys.readouterr()
        assert main(["actions", "resume", str(done["action_id"]), "--config", str(config)]) == 0
        wait_for("node1 idle after resume", lambda: node_state() == "idle", 30)
        assert main(["actions", "--config", str(config), "--format", "json"]) == 0
        listed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
        assert listed[0]["resumed_at"] is not None

        job_b = submit(root / "drain", "ff-auto-b", GPU_JOB)
        rows = decisions(warehouse, job_b)
    assert [(r["status"], r["reason"], r["node"]) for r in rows] == [("skipped", "max_nodes_per_hour", "node1")]
    assert node_state() == "idle"


def test_dry_run_records_what_would_be_done_and_drains_nothing(loop):
    root, config = loop
    warehouse = with_actions(root, config, "dry", "dry_run = true")
    with running_worker(config):
        job = submit(root / "dry", "ff-auto-dry", GPU_JOB)
        [row] = decisions(warehouse, job)
    assert (row["attempt_id"], row["status"], row["node"]) == (f"ci/{job}/0", "dry_run", "node1")
    argv = json.loads(row["command"])
    assert argv[1:4] == ["update", "NodeName=node1", "State=DRAIN"] and argv[4] == f"Reason={row['reason']}"
    assert node_state() == "idle" and "DRAIN" not in re.search(r"State=(\S+)", scontrol_node()).group(1)


def test_a_burst_of_50_epilog_calls_queues_50_files_and_each_job_is_attributed_once(loop):
    root, config = loop
    write_config(root, config, "burst", kernel_log=False)
    hook = Path(re.search(r"^EpilogSlurmctld\s*=\s*(\S+)", run("scontrol", "show", "config"), re.M).group(1)).parent / "hook"
    hook.chmod(0o644)  # these jobs' real epilog queues nothing: the burst below is the only queueing
    try:
        jobs = [submit(root / "burst", f"ff-auto-burst{i}", wrap=f"exit {i + 1}") for i in range(5)]
        wait_final(jobs)
    finally:
        hook.chmod(0o755)
    command = ["runuser", "-u", "slurm", "--", "sh", "-c", epilog_command(config)]
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    ok_env = {**base, "SLURM_JOB_ID": jobs[0], "SLURM_JOB_EXIT_CODE2": "0:0", "SLURM_JOB_DERIVED_EC": "0"}
    subprocess.run(command, env=ok_env, check=True, timeout=10)
    assert not queued(root), "a successful job was queued"
    for call in range(50):  # each job 10 times, as if its epilog had run again (its speed: benchmarks/bench_epilog.py)
        job = jobs[call % 5]
        env = {**base, "SLURM_JOB_ID": job, "SLURM_JOB_EXIT_CODE2": f"{call % 5 + 1}:0", "SLURM_JOB_DERIVED_EC": "0",
               "SLURM_JOB_EXIT_CODE": str((call % 5 + 1) * 256), "SLURM_CLUSTER_NAME": "ci"}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=10)
        assert done.returncode == 0 and not done.stderr, done.stderr
    assert len(queued(root)) == 50
    worker = Worker(load_config(str(config)))
    attributed = []
    deadline = time.monotonic() + 120
    while queued(root) and time.monotonic() < deadline:
        attributed += worker.run_pass()
        time.sleep(0.3)
    assert sorted(attributed) == sorted(f"ci/{j}/0" for j in jobs)
    runs = warehouse_rows(str(root / "burst" / "wh.duckdb"), "SELECT count(*) AS n FROM runs WHERE flow = 'worker'")
    assert runs[0]["n"] == 5
    delivered = [json.loads(x)["attempt_id"] for x in (root / "burst" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(delivered) == sorted(attributed)
