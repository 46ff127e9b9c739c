import os

import pytest

# Prefect runs with the defaults the product sets (analytics and telemetry off: tests/test_prefect_quiet.py) and never
# writes into the user's home (PREFECT_HOME below); importing the flows package sets them before Prefect is imported.
import firstfault.flows  # noqa: F401


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory):
    """The demo written once per session (not attributed)."""
    from firstfault.synthetic.demo import write_demo

    root = tmp_path_factory.mktemp("demo")
    write_demo(root)
    return root


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One Prefect test server for the whole session (started only when a flow test asks for it)."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def warehouse_rows(path, sql):
    """Rows of a read-only query on a warehouse file, as dicts."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()


# the warehouse rows two runners must agree on (no table has a run-specific column): tests/test_nightly_dask.py and
# tests/test_dask_hosts.py compare the Dask runner's with the local runner's
RUNNER_TABLES = {
    "attributions": "SELECT * FROM attributions ORDER BY attempt_id",
    "attribution_evidence": "SELECT * FROM attribution_evidence ORDER BY attempt_id, position",
    "events": "SELECT * FROM events ORDER BY attempt_id, event_id",
    "rule_hits": "SELECT * FROM rule_hits ORDER BY ALL",
    "connector_reports": "SELECT * FROM connector_reports ORDER BY ALL",
}


def committed_generation(partition) -> str:
    """The generation of the one completion marker of the attempt whose partition (a pathlib folder
    <lake>/<table>/day=D/attempt_key=K) this is: a committed attempt has exactly one (firstfault/lake.py)."""
    (marker,) = (partition.parents[2] / "commits" / partition.parent.name / partition.name).glob("*.json")
    return marker.stem
