"""SIGINT and SIGTERM end a long command cleanly: exit 130/143, one line on stderr and no traceback, and the nightly
run leaves no shard folders in the lake and no rows in the warehouse."""
import signal
import subprocess
import sys
import time

import pytest

from firstfault.synthetic.demo import write_demo


def start(args, cwd):
    return subprocess.Popen([sys.executable, "-m", "firstfault.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(condition, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the command never got to work"
        time.sleep(0.05)


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_nightly_exits_cleanly_and_leaves_nothing_half_written(tmp_path, signum, status):
    write_demo(tmp_path / "demo")
    lake, warehouse = tmp_path / "lake", tmp_path / "w.duckdb"
    proc = start(["nightly", "--date", "2026-11-29", "--catalog", str(tmp_path / "demo"), "--lake", str(lake),
                  "--warehouse", str(warehouse), "--prefect", "never"], tmp_path)
    wait_for(lambda: (lake / "results").exists() or proc.poll() is not None)  # the first shard is being written
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] in ("firstfault: interrupted", "firstfault: terminated")
    assert not list((lake / "results").glob("run=*")), "shard folders left in the lake"
    assert not warehouse.exists() or "attributed" not in out


def test_a_terminated_simulate_prints_no_traceback_and_leaves_no_half_fleet(tmp_path):
    proc = start(["simulate", "--nodes", "64", "--attempts", "5000", "--out", str(tmp_path / "fleet")], tmp_path)
    wait_for(lambda: any((tmp_path / "fleet" / "catalog").glob("*/*")) or proc.poll() is not None)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143
    assert err.strip() == "firstfault: terminated"
    assert not (tmp_path / "fleet").exists()
