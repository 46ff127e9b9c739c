"""A lake or warehouse the file system refuses to write (a read-only mount, permissions) is bad input: exit 2
and one line naming the path and what to do, never an internal error. The folder is made read-only for real (a
read-only tmpfs as root, whom chmod does not stop; chmod otherwise), and the refusal is also injected in process."""
import errno
import os
import pathlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from firstfault.cli import main

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
