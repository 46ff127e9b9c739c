"""The nightly flow on a real local Dask cluster (worker processes) gives the same warehouse rows as the local run."""
import shutil

import duckdb
import pytest

from conftest import RUNNER_TABLES
from firstfault.synthetic.demo import write_demo

DAY = "2026-11-29"


def dump(path):
    con = duckdb.connect(path, read_only=True)
    try:
        return {t: con.execute(q).fetchall() for t, q in RUNNER_TABLES.items()}
    finally:
        con.close()


@pytest.mark.flow
def test_dask_run_equals_local_run(prefect_api, tmp_path):
    from firstfault.flows.nightly import run

    write_demo(tmp_path / "demo")
    catalog = tmp_path / "catalog"
    for name in ("headline", "ib-link-down", "cuda-oom", "ambiguous"):
        shutil.copytree(tmp_path / "demo" / "attempts" / name, catalog / name)
    lake = str(tmp_path / "lake")  # the same lake and catalog for both runs: uris are equal
    params = dict(run_date=DAY, catalog=str(catalog), lake_root=lake, shards=3)
    [local] = run("local", **params, warehouse_path=str(tmp_path / "local.duckdb"))
    [dask] = run("dask", **params, warehouse_path=str(tmp_path / "dask.duckdb"))
    assert local["attributed"] == dask["attributed"] == 4 and dask["failed"] == 0 and dask["shards"] == 3
    assert local["verdicts"] == dask["verdicts"] == {"ambiguous": 1, "attributed": 3}
    a, b = dump(str(tmp_path / "local.duckdb")), dump(str(tmp_path / "dask.duckdb"))
    for table in RUNNER_TABLES:
        only = sorted(set(map(repr, a[table])) ^ set(map(repr, b[table])))  # what differs, if anything
        assert a[table] and a[table] == b[table], (table, only[:4])
