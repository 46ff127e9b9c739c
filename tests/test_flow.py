"""The on-demand Prefect flow calls the same functions as the direct path and gives the same verdict."""
import duckdb

from firstfault.cli import main


def verdict_row(path):
    con = duckdb.connect(path, read_only=True)
    try:
        return con.execute("SELECT verdict, domain, subdomain, culprit_nodes, root_cause FROM attributions").fetchall()
    finally:
        con.close()


def test_flow_and_direct_runs_agree(prefect_api, demo_dir, tmp_path, capsys):
    spec = str(demo_dir / "attempts" / "headline" / "attempt.yaml")
    common = ["attribute", "--static", spec, "--lake", str(tmp_path / "lake")]
    assert main([*common, "--warehouse", str(tmp_path / "flow.duckdb"), "--prefect", "always"]) == 0
    assert main([*common, "--warehouse", str(tmp_path / "direct.duckdb"), "--prefect", "never"]) == 0
    capsys.readouterr()
    assert verdict_row(str(tmp_path / "flow.duckdb")) == verdict_row(str(tmp_path / "direct.duckdb"))
    con = duckdb.connect(str(tmp_path / "flow.duckdb"), read_only=True)
    assert con.execute("SELECT flow FROM runs").fetchall() == [("attribute-attempt",)]
    con.close()
