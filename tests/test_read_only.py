"""A lake, warehouse, spool or outbox the file system refuses to write (a read-only mount, permissions) is bad input:
exit 2 and one line naming the path and what to do, never an internal error, and the worker never loops on it (the
epilog, which must never fail Slurm's epilog, says it in its one line and exits 0). The folder is made read-only for
real (a read-only bind mount as root, whom chmod does not stop; chmod otherwise), or the refusal is injected in
process."""
import errno
import os
import pathlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from test_actions import verdict

from firstfault.cli import main
from firstfault.config import load_config
from firstfault.connectors.slurm_epilog import queue_job
from firstfault.errors import BadInput
from firstfault.warehouse.sinks import Outbox
from firstfault.worker import Worker

XID = "Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"


@pytest.fixture()
def read_only(tmp_path):
    """make_read_only(folder): the folder (with what is in it already) can no longer be written."""
    mounted = []

    def make_read_only(folder: Path) -> Path:
        if os.geteuid() == 0:
            subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True, capture_output=True)
            mounted.append(folder)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        else:
            folder.chmod(0o555)
        return folder

    yield make_read_only
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=True)


def attempt(tmp_path: Path) -> Path:
    (tmp_path / "node-01.log").write_text(XID)
    spec = tmp_path / "attempt.yaml"
    spec.write_text(yaml.safe_dump({"workload_id": "w", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z",
                                    "nodes": ["node-01"], "state": "FAILED", "logs": [{"source": "syslog", "path": "node-01.log"}]}))
    return spec


def firstfault(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "firstfault.cli", "-q", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def assert_named(done: subprocess.CompletedProcess, path: Path) -> None:
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1 and str(path) in err and "internal error" not in err, err


@pytest.mark.parametrize("which", ["lake", "warehouse"])
def test_a_read_only_lake_or_warehouse_is_bad_input(tmp_path, read_only, which):
    spec = attempt(tmp_path)
    folder = tmp_path / "ro"
    folder.mkdir()
    read_only(folder)
    paths = {"lake": str(tmp_path / "lake"), "warehouse": str(tmp_path / "w.duckdb"),
             which: str(folder / ("lake" if which == "lake" else "w.duckdb"))}
    done = firstfault("attribute", "--static", str(spec), "--lake", paths["lake"], "--warehouse", paths["warehouse"], cwd=tmp_path)
    assert_named(done, folder)
    assert "make it writable" in done.stderr


@pytest.mark.parametrize("refusal", [errno.EROFS, errno.EACCES])
def test_a_refused_lake_write_is_bad_input_in_process(tmp_path, capsys, monkeypatch, refusal):
    spec = attempt(tmp_path)
    lake = tmp_path / "lake"
    real_mkdir = pathlib.Path.mkdir

    def refusing_mkdir(self, *args, **kwargs):
        if str(self).startswith(str(lake)):
            raise OSError(refusal, os.strerror(refusal), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", refusing_mkdir)
    monkeypatch.setattr(os, "makedirs", lambda path, *a, **k: refusing_mkdir(Path(path), parents=True, exist_ok=True))
    assert main(["attribute", "--static", str(spec), "--lake", str(lake), "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"firstfault: {lake}") and os.strerror(refusal) in err and len(err.splitlines()) == 1, err


# --- the worker's spool and outbox ---------------------------------------------------------------------------------

@pytest.fixture()
def refuse_writes(monkeypatch):
    """refuse_writes(folder): from now on every write under `folder` (a file opened for writing, a folder made, a
    rename, a removal) fails as on a read-only mount, for root too."""
    import io

    def refuse_under(folder: Path):
        def refusing(call, path_of, writes=lambda *a, **k: True):
            def refused(*args, **kwargs):
                path = os.fspath(path_of(*args))
                if writes(*args, **kwargs) and (path == str(folder) or path.startswith(f"{folder}{os.sep}")):
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
                return call(*args, **kwargs)
            return refused

        def opened_for_writing(file, mode="r", *args, **kwargs):
            return any(c in mode for c in "wax+")

        monkeypatch.setattr(io, "open", refusing(io.open, lambda file, *a: file, opened_for_writing))
        for name in ("mkdir", "replace", "rename", "unlink"):
            monkeypatch.setattr(os, name, refusing(getattr(os, name), lambda path, *a: path))

    return refuse_under


def worker_toml(tmp_path: Path) -> Path:
    config = tmp_path / "ff.toml"
    config.write_text(f'[slurm]\nenabled = true\n\n[automation]\nspool_dir = "{tmp_path / "spool"}"\nsettle_s = 0.0\n'
                      f'outputs = ["jsonl:{tmp_path / "out.jsonl"}"]\n')
    return config


def ended(call, *args):
    """What `call(*args)` returned or raised, from a thread given a minute: a worker that loops is a failure, not a
    test that never ends."""
    outcome: list = []

    def run():
        try:
            outcome.append(call(*args))
        except Exception as e:  # noqa: BLE001 - handed to the test
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert outcome, f"{call.__name__} did not end"
    return outcome[0]


@pytest.mark.parametrize("once", [True, False], ids=["worker --once", "worker"])
@pytest.mark.parametrize("refused", ["spool", "spool/outbox"])
def test_a_read_only_spool_or_outbox_stops_the_worker_with_one_line(tmp_path, capsys, refuse_writes, once, refused):
    config = worker_toml(tmp_path)
    queue_job(str(tmp_path / "spool"), {"SLURM_JOB_ID": "42", "SLURM_JOB_EXIT_CODE2": "1:0"})
    refuse_writes(tmp_path / refused)
    assert ended(main, ["worker", "--config", str(config), *(["--once"] if once else [])]) == 2
    err = capsys.readouterr().err
    assert err == (f"firstfault: {tmp_path / refused}: {os.strerror(errno.EROFS)}: make it writable by the worker's user or "
                   "set [automation] spool_dir to a folder it can write\n")


def test_a_spool_that_turns_read_only_stops_the_running_worker(tmp_path, refuse_writes):
    config = load_config(str(worker_toml(tmp_path)))
    worker = Worker(config)
    queue_job(str(tmp_path / "spool"), {"SLURM_JOB_ID": "42", "SLURM_JOB_EXIT_CODE2": "1:0"})
    refuse_writes(tmp_path / "spool")  # a file system remounted read-only on errors
    stopped = ended(worker.run, threading.Event())
    assert isinstance(stopped, BadInput) and stopped.file == str(tmp_path / "spool" / "queue")


def test_an_outbox_that_turns_read_only_after_a_send_is_not_sent_again_and_again(tmp_path, refuse_writes):
    config = load_config(str(worker_toml(tmp_path)))
    outbox = Outbox(tmp_path / "spool" / "outbox")
    outbox.put(config, [verdict()])
    refuse_writes(outbox.folder)
    with pytest.raises(BadInput) as refused:
        outbox.flush(config)
    assert refused.value.file == str(outbox.folder) and "[automation] spool_dir" in str(refused.value)
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 1


def test_the_epilog_names_a_read_only_spool_and_still_never_fails(tmp_path, capsys, refuse_writes, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "43")
    monkeypatch.setenv("SLURM_JOB_EXIT_CODE2", "1:0")
    refuse_writes(tmp_path / "spool")
    assert main(["epilog", "--spool-dir", str(tmp_path / "spool")]) == 0  # a failed epilog is slurmctld's noise only
    err = capsys.readouterr().err
    assert err == (f"firstfault epilog: job 43 not queued: {tmp_path / 'spool' / 'queue'}: {os.strerror(errno.EROFS)}: "
                   "make it writable by SlurmUser or set [automation] spool_dir (or --spool-dir) to a folder it can write\n")


def test_the_worker_leaves_making_the_queue_to_the_epilog(tmp_path):
    # made by the worker's user, the queue would not be SlurmUser's to write in
    Worker(load_config(str(worker_toml(tmp_path))))
    assert sorted(p.name for p in (tmp_path / "spool").iterdir()) == ["outbox"]
