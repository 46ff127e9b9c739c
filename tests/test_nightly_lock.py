"""One nightly run per warehouse at a time: a second one exits non-zero with one line naming the run that holds the
lock; the lock of a run that died is taken over."""
import json
import shutil
import subprocess
import sys

from firstfault.cli import main
from firstfault.synthetic.demo import write_demo
from firstfault.warehouse.night_lock import lock_path

DAY = "2026-11-29"
HOLD = """
import sys, time
from firstfault.warehouse.night_lock import nightly_lock
with nightly_lock(sys.argv[1], "run-holding-it"):
    print("held", flush=True)
    time.sleep(60)
"""


def catalog(tmp_path):
    write_demo(tmp_path / "demo")
    shutil.copytree(tmp_path / "demo" / "attempts" / "headline", tmp_path / "catalog" / "headline")
    return ["nightly", "--date", DAY, "--catalog", str(tmp_path / "catalog"), "--lake", str(tmp_path / "lake"),
            "--warehouse", str(tmp_path / "wh.duckdb"), "--prefect", "never"]


def test_a_second_nightly_on_the_same_warehouse_is_refused_naming_the_holder(tmp_path, capsys):
    args = catalog(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "wh.duckdb")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "nightly run run-holding-it (pid " in err and f"pid {holder.pid} " in err, err
        assert not (tmp_path / "wh.duckdb").exists() and not (tmp_path / "lake").exists()  # nothing was touched
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing anything: its lock is taken over
    assert json.loads(lock_path(str(tmp_path / "wh.duckdb")).read_text())["run_id"] == "run-holding-it"
    assert main(args) == 0, capsys.readouterr().err
    assert not lock_path(str(tmp_path / "wh.duckdb")).exists()  # removed when the run ended: nothing left beside the warehouse


def test_a_stale_lock_file_of_a_dead_pid_is_taken_over(tmp_path, capsys):
    args = catalog(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock_path(str(tmp_path / "wh.duckdb")).write_text(json.dumps(
        {"run_id": "dead-run", "pid": int(dead.stdout), "host": "h", "started_at": "2026-11-30T02:00:00+00:00"}))
    assert main(args) == 0, capsys.readouterr().err
    assert "attributed 1" in capsys.readouterr().out


def test_a_run_that_found_the_lock_file_removed_under_it_locks_the_new_one(tmp_path, monkeypatch):
    # the holder removes the file as it ends; a run that opened the old file just before then locks a file no path
    # names any more, so it opens the path again instead of running beside the next run
    from firstfault.warehouse import night_lock

    warehouse = str(tmp_path / "wh.duckdb")
    opened = []
    real_open = night_lock.os.open

    def open_then_lose_the_race(path, *args):
        fd = real_open(path, *args)
        if not opened:  # the first open: the file is removed (a holder ending) before this run locks it
            night_lock.os.unlink(path)
        opened.append(fd)
        return fd

    monkeypatch.setattr(night_lock.os, "open", open_then_lose_the_race)
    with night_lock.nightly_lock(warehouse, "run-b"):
        assert len(opened) == 2
        assert json.loads(lock_path(warehouse).read_text())["run_id"] == "run-b"
    assert not lock_path(warehouse).exists()


def test_results_left_by_a_dead_run_of_this_warehouse_are_removed_others_kept(tmp_path, capsys):
    args = catalog(tmp_path)
    results = tmp_path / "lake" / "results"
    for run, owner in (("dead", str(tmp_path / "wh.duckdb")), ("other", str(tmp_path / "other.duckdb")), ("unmarked", None)):
        (results / f"run={run}" / "shard=0").mkdir(parents=True)
        if owner:
            (results / f"run={run}" / "warehouse").write_text(owner)
    assert main(args) == 0, capsys.readouterr().err
    assert sorted(p.name for p in results.iterdir()) == ["run=other", "run=unmarked"]
