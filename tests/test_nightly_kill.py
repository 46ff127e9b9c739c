"""kill -9 of a nightly at seeded points, then a rerun: the warehouse holds exactly the rows of an uninterrupted run,
and no worker process, results folder, temporary file or lake file of a killed landing is left behind."""
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from firstfault.schema import ATTEMPT_TABLES
from firstfault.synthetic.simulate import simulate
from firstfault.warehouse.night_lock import lock_path

from conftest import committed_generation

SEED = 13
DAY = "2026-11-01"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    # 19 attempts end on DAY: enough for the shards to run in worker processes
    out = tmp_path_factory.mktemp("kill-fleet")
    simulate(str(out), nodes=16, attempts=24, days=1, seed=1)
    return out / "catalog"


def start(catalog: Path, root: Path) -> subprocess.Popen:
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["TMPDIR"] = str(root / "tmp")
    return subprocess.Popen([sys.executable, "-m", "firstfault.cli", "nightly", "--date", DAY, "--catalog", str(catalog),
                             "--lake", str(root / "lake"), "--warehouse", str(root / "w.duckdb"), "--prefect", "never"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                children = {int(c) for c in (task / "children").read_text().split()}
            except OSError:
                continue
            todo.extend(children - found)
            found |= children
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def rows(path: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in ATTEMPT_TABLES}
    finally:
        con.close()


def test_kill_9_at_seeded_points_then_rerun_equals_an_uninterrupted_run(catalog, tmp_path):
    clean = start(catalog, tmp_path / "clean")
    assert clean.wait(timeout=600) == 0, clean.stderr.read()
    expected = rows(tmp_path / "clean" / "w.duckdb")
    assert expected["attributions"]

    root = tmp_path / "killed"
    rng = random.Random(SEED)
    for _ in range(3):
        proc = start(catalog, root)
        deadline = time.monotonic() + rng.uniform(1.0, 7.0)
        workers: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            workers |= descendants(proc.pid)
            time.sleep(0.1)
        proc.kill()
        proc.wait()
        gone_by = time.monotonic() + 15
        while any(alive(w) for w in workers) and time.monotonic() < gone_by:
            time.sleep(0.2)
        assert not [w for w in workers if alive(w)], "worker processes outlived the killed nightly"

    rerun = start(catalog, root)
    assert rerun.wait(timeout=600) == 0, rerun.stderr.read()
    assert rows(root / "w.duckdb") == expected
    con = duckdb.connect(str(root / "w.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM run_failures").fetchall() == [(0,)]
    con.close()
    results = root / "lake" / "results"
    assert not results.exists() or not any(results.iterdir()), sorted(results.iterdir())
    assert not any((root / "tmp").iterdir()), sorted((root / "tmp").iterdir())
    assert not lock_path(str(root / "w.duckdb")).exists()  # the rerun took the dead run's lock over and removed it
    for partition in (root / "lake").glob("*/day=*/attempt_key=*"):  # one generation, committed: the killed ones' files went
        if partition.parts[-3] in ("commits", "staged"):
            continue
        generation = committed_generation(partition)
        assert all(f.name.startswith(f"part-{generation}-") for f in partition.glob("*.parquet")), sorted(partition.iterdir())


def run_processes(marker: str) -> set[int]:
    """Every live process whose environment carries `marker` (the run's TMPDIR): the nightly and all it started,
    whoever their parent is now."""
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes().split(b"\0"):
                found.add(int(environ.parent.name))
        except OSError:
            continue
    return {pid for pid in found if alive(pid)}


def test_kill_9_of_a_dask_nightly_leaves_no_process_behind(catalog, tmp_path):
    """Prefect's temporary API server (and the Dask cluster) end with a nightly killed with kill -9."""
    root = tmp_path / "dask"
    (root / "tmp").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(TMPDIR=str(root / "tmp"), PREFECT_HOME=str(root / "prefect"), PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
    marker = f"TMPDIR={root / 'tmp'}"
    proc = subprocess.Popen([sys.executable, "-m", "firstfault.cli", "nightly", "--date", DAY, "--catalog", str(catalog),
                             "--lake", str(root / "lake"), "--warehouse", str(root / "w.duckdb"), "--runner", "dask"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.monotonic() + 120
    while time.monotonic() < started and proc.poll() is None and len(run_processes(marker)) < 4:
        time.sleep(0.2)  # the server and the cluster's processes are up
    time.sleep(2)
    assert proc.poll() is None, "the nightly ended before it could be killed"
    proc.kill()
    proc.wait()
    gone_by = time.monotonic() + 10
    while run_processes(marker) and time.monotonic() < gone_by:
        time.sleep(0.2)
    left = run_processes(marker)
    commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120] for pid in left}
    for pid in left:  # this test's own processes
        os.kill(pid, 9)
    assert not left, f"processes outlived the killed nightly: {commands}"
