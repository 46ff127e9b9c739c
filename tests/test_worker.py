"""The worker's state survives faults, without a cluster (the live loop: tests/test_automation.py): an outbox entry
cut short, a webhook that hangs or is down, errors that pass, an epilog host with another clock, parts of files
left by a full spool, and its line per attempt. Webhooks are local servers on 127.0.0.1 (tests/local_webhook.py)."""
import errno
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from local_webhook import Receiver
from test_actions import verdict

import firstfault.worker as worker_module
from firstfault.cli import main
from firstfault.config import Config, load_config
from firstfault.ids import attempt_key
from firstfault.connectors.slurm_epilog import STALE_PART_S, queue_job
from firstfault.warehouse.actions import Decision
from firstfault.warehouse.sinks import Outbox
from firstfault.worker import STILL_QUEUED, NotYet, Worker

REPO = Path(__file__).resolve().parents[1]
FAILED_JOB = {"SLURM_JOB_EXIT_CODE2": "1:0"}


def worker_config(tmp_path: Path, *, webhook: dict | None = None, **automation) -> Config:
    config = Config()
    return replace(config, slurm=replace(config.slurm, enabled=True),
                   automation=replace(config.automation, spool_dir=str(tmp_path / "spool"), **automation),
                   webhook=replace(config.webhook, **(webhook or {})))


def queue(config: Config, job: str) -> Path:
    return queue_job(config.automation.spool_dir, {"SLURM_JOB_ID": job, **FAILED_JOB})


def attributes(tries: list[str]):
    """Worker.attribute answering one verdict per job, recording each ref it is asked about."""
    def attribute(self, ref, last_try):
        tries.append(ref)
        return [verdict(attempt_id=f"ci/{ref.replace(':', '/')}")]
    return attribute


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jsonl_sink(tmp_path: Path) -> tuple[str, ...]:
    return (f"jsonl:{tmp_path / 'out' / 'v.jsonl'}",)


def delivered(tmp_path: Path) -> list[str]:
    path = tmp_path / "out" / "v.jsonl"
    return [json.loads(line)["attempt_id"] for line in path.read_text().splitlines()] if path.exists() else []


# --- the outbox ----------------------------------------------------------------------------------------------------

def test_a_truncated_outbox_entry_is_set_aside_and_every_other_verdict_is_still_sent(tmp_path, caplog):
    config = worker_config(tmp_path, outputs=jsonl_sink(tmp_path))
    outbox = Outbox(tmp_path / "outbox")
    outbox.put(config, [verdict(attempt_id="ci/1/0"), verdict(attempt_id="ci/2/0")])
    first = outbox.pending()[0]
    first.write_text(first.read_text()[:40])  # a rewrite cut short by a full disk
    assert outbox.flush(config, now=100.0) == (1, 0)
    assert delivered(tmp_path) == ["ci/2/0"]
    assert [p.name for p in outbox.set_aside.iterdir()] == [first.name]
    assert f"{first.name}: not an outbox entry" in caplog.text


def test_a_retry_whose_rewrite_fails_leaves_the_entry_whole_and_is_no_crash(tmp_path, monkeypatch):
    obstacle = tmp_path / "out"
    obstacle.write_text("")  # a file where the output's folder should be: the send fails
    config = worker_config(tmp_path, outputs=jsonl_sink(tmp_path), retry_s=5.0)
    outbox = Outbox(tmp_path / "outbox")
    outbox.put(config, [verdict()])
    [entry] = outbox.pending()
    queued = entry.read_text()
    write_text = Path.write_text

    def disk_full(self, text, *args, **kwargs):
        write_text(self, text[:len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    assert outbox.flush(config, now=100.0) == (0, 1)
    monkeypatch.undo()
    assert entry.read_text() == queued and not list(outbox.folder.glob(".*"))  # as it was, no part left
    obstacle.unlink()
    assert outbox.flush(config, now=200.0) == (1, 0) and delivered(tmp_path) == ["ci/42/0"]


def test_an_outbox_entry_that_cannot_be_read_is_a_failed_send_not_a_crash(tmp_path):
    config = worker_config(tmp_path, outputs=jsonl_sink(tmp_path))
    outbox = Outbox(tmp_path / "outbox")
    outbox.put(config, [verdict(attempt_id="ci/2/0")])
    (outbox.folder / f"0~{attempt_key('ci/1/0')}.json").mkdir()  # reading it fails with an OSError
    assert outbox.flush(config, now=100.0) == (1, 1)
    assert delivered(tmp_path) == ["ci/2/0"]


# --- a webhook that hangs or is down -------------------------------------------------------------------------------

def test_a_hanging_webhook_with_15_verdicts_queued_holds_back_no_attribution_or_action(tmp_path, monkeypatch):
    hook = Receiver(hang=True)
    config = worker_config(tmp_path, webhook={"url": hook.url, "timeout_s": 100.0, "retries": 0}, settle_s=0.0, poll_s=0.05)
    Outbox(tmp_path / "spool" / "outbox").put(config, [verdict(attempt_id=f"ci/{i}/0") for i in range(15)])
    tries, acted = [], []
    monkeypatch.setattr(Worker, "attribute", attributes(tries))
    monkeypatch.setattr(worker_module, "apply_actions", lambda config, verdicts, scheduler: acted.extend(v["attempt_id"] for v in verdicts) or [])
    worker, stop = Worker(config), threading.Event()
    running = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    running.start()
    try:
        assert hook.arrived.wait(30), "the worker sent nothing"
        queue(config, "99")  # a job that fails while the webhook holds the first send
        deadline = time.monotonic() + 30
        while "ci/99/0" not in acted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert acted == ["ci/99/0"] and tries == ["99:0"]
        assert hook.posts == [] and len(worker.outbox.pending()) == 16  # the first send is still held
    finally:
        stop.set()
        hook.close()
        running.join(30)
    assert not running.is_alive()


def write_toml(tmp_path: Path, *, webhook: str = "", outputs: tuple[str, ...] = ()) -> Path:
    path = tmp_path / "ff.toml"
    path.write_text(f"""
[slurm]
enabled = true

[automation]
spool_dir = "{tmp_path / 'spool'}"
settle_s = 0.0
retry_s = 0.1
outputs = {json.dumps(list(outputs))}

[webhook]
url = "{webhook}"
timeout_s = 5.0
retries = 1
backoff_s = 0.1
""")
    return path


def worker_once(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "firstfault.cli", "worker", "--once", "--config", str(config)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_worker_once_with_a_dead_webhook_tries_once_and_exits_with_the_still_queued_status(tmp_path):
    port = free_port()  # nothing listens there: the webhook is down
    config = write_toml(tmp_path, webhook=f"http://127.0.0.1:{port}/hook")
    outbox = Outbox(tmp_path / "spool" / "outbox")
    outbox.put(load_config(str(config)), [verdict(attempt_id=f"ci/{i}/0") for i in range(3)])
    done = worker_once(config)
    assert done.returncode == STILL_QUEUED == 75, done.stderr
    assert "not sent (try 1), kept for the next pass" in done.stderr
    tries = [json.loads(p.read_text())["tries"] for p in outbox.pending()]
    assert sorted(tries) == [0, 0, 1]  # the webhook was tried once; the other verdicts wait for the next run
    hook = Receiver(port)
    try:
        assert worker_once(config).returncode == 0
    finally:
        hook.close()
    assert sorted(body["verdict"]["attempt_id"] for _, body in hook.posts) == ["ci/0/0", "ci/1/0", "ci/2/0"]
    assert outbox.pending() == []


# --- errors that pass, and the worker's own clock ------------------------------------------------------------------

def test_a_transient_warehouse_error_is_tried_again_with_back_off_and_never_set_aside(tmp_path, monkeypatch):
    config = worker_config(tmp_path, settle_s=0.0, retry_s=10.0, give_up_s=30.0)
    queue(config, "7")
    tries = []

    def damaged_for_a_while(self, ref, last_try):
        tries.append(ref)
        if len(tries) < 4:
            raise OSError(f"{config.warehouse.path}: not a usable DuckDB file")
        return [verdict(attempt_id="ci/7/0")]

    monkeypatch.setattr(Worker, "attribute", damaged_for_a_while)
    worker = Worker(config)
    start = 1_000_000.0
    # waits of 10 and 20 s, then 30 (at most give_up_s): the third try fails past give_up_s and is kept all the same
    for at, attributed in ((0, []), (10, []), (20, []), (30, []), (40, []), (59, []), (60, ["ci/7/0"])):
        assert worker.run_pass(now=start + at) == attributed
    assert len(tries) == 4
    assert not (tmp_path / "spool" / "failed").exists()


@pytest.mark.parametrize("skew", [-700.0, 700.0], ids=["epilog-clock-behind", "epilog-clock-ahead"])
def test_settle_and_give_up_are_measured_on_the_workers_clock_whatever_the_epilogs(tmp_path, monkeypatch, skew):
    """The epilog's host keeps another time; each pass is a new process, as `worker --once` from cron is."""
    config = worker_config(tmp_path, settle_s=30.0, retry_s=30.0, give_up_s=600.0)
    path = queue(config, "8")
    job = json.loads(path.read_text())
    path.write_text(json.dumps({**job, "queued_at": job["queued_at"] + skew}))
    tries = []

    def in_accounting_after_a_minute(self, ref, last_try):
        tries.append(ref)
        if len(tries) < 2:
            raise NotYet(f"no job {ref} in accounting")
        return [verdict(attempt_id="ci/8/0")]

    monkeypatch.setattr(Worker, "attribute", in_accounting_after_a_minute)
    start = job["queued_at"]
    assert Worker(config).run_pass(now=start) == [] and tries == []  # settling
    assert Worker(config).run_pass(now=start + 30) == [] and tries == ["8:0"]  # not in accounting yet: kept
    assert Worker(config).run_pass(now=start + 60) == ["ci/8/0"]
    assert not (tmp_path / "spool" / "failed").exists()


# --- parts left by a full spool --------------------------------------------------------------------------------------

def test_a_part_left_by_a_full_spool_is_removed_and_a_part_being_written_is_not(tmp_path):
    config = worker_config(tmp_path)
    queue_dir, outbox_dir = tmp_path / "spool" / "queue", tmp_path / "spool" / "outbox"
    for folder in (queue_dir, outbox_dir):
        folder.mkdir(parents=True)
    now = time.time()
    old = [queue_dir / ".1.0.1.1.json.tmp", outbox_dir / ".0~ci~2F1~2F0.json.tmp"]
    for part in old:
        part.write_text("")
        os.utime(part, (now - STALE_PART_S - 60, now - STALE_PART_S - 60))
    fresh = queue_dir / ".2.0.2.2.json.tmp"
    fresh.write_text("")
    Worker(config).run_pass(now=now)
    assert not any(p.exists() for p in old) and fresh.exists()


def test_the_epilog_leaves_no_part_when_the_spool_is_full(tmp_path, monkeypatch):
    write_text = Path.write_text

    def disk_full(self, text, *args, **kwargs):
        write_text(self, "", *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        queue_job(str(tmp_path / "spool"), {"SLURM_JOB_ID": "9", **FAILED_JOB})
    assert list((tmp_path / "spool" / "queue").iterdir()) == []


# --- what the worker prints ----------------------------------------------------------------------------------------

def test_the_worker_prints_one_line_per_attempt_with_verdict_culprit_and_the_action_or_why_not(tmp_path, monkeypatch, capsys):
    config = write_toml(tmp_path, outputs=jsonl_sink(tmp_path))
    settings = load_config(str(config))
    for job in ("11", "12"):
        queue(settings, job)
    monkeypatch.setattr(Worker, "attribute", lambda self, ref, last_try: [verdict(
        attempt_id=f"ci/{ref.replace(':', '/')}", action="restart_excluding_nodes" if ref == "12:0" else "drain_node")])
    assert main(["worker", "--once", "--config", str(config)]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "ci/11/0 (job 11:0): attributed hardware/gpu_lost; culprit node1; action drain_node: not taken ([actions] enabled = false)",
        "ci/12/0 (job 12:0): attributed hardware/gpu_lost; culprit node1; action restart_excluding_nodes: not taken (the worker acts on drain_node only)"]

    queue(settings, "13")
    skipped = Decision("ci/13/0", "ci", "node1", "xid_root", "drain", "skipped", "max_nodes_per_hour")
    monkeypatch.setattr(worker_module, "apply_actions", lambda config, verdicts, scheduler: [skipped])
    assert main(["worker", "--once", "-v", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["ci/13/0 (job 13:0): attributed hardware/gpu_lost; culprit node1; action drain_node: node1 skipped (max_nodes_per_hour)"]
    assert f"jsonl:{tmp_path / 'out' / 'v.jsonl'}: ci/13/0 sent" in err  # -v: each send too
