"""The nightly run with the lake on S3 (moto's server): same verdicts as with the lake on local disk; a run killed
while landing keeps the earlier landing readable there too."""
import shutil

import duckdb
import pytest

from firstfault.cli import main
from firstfault.config import Config, LakeSettings, WarehouseSettings, load_config
from firstfault.lake import TABLES, Lake
from firstfault.synthetic.demo import write_demo
from firstfault.nightly import run_nightly
from test_lake_generations import DAY as KILL_DAY, XID, kill_during_landing

DAY = "2026-11-29"


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint, monkeypatch):
    import s3fs
    import requests

    monkeypatch.delenv("AWS_PROFILE", raising=False)
    requests.post(f"{s3_endpoint}/moto-api/reset", timeout=10)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(key="foo", secret="foo", client_kwargs={"endpoint_url": s3_endpoint, "region_name": "us-east-1"})
    import boto3

    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="foo", aws_secret_access_key="foo",
                 region_name="us-east-1").create_bucket(Bucket="lake")
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()


def verdicts(path):
    con = duckdb.connect(path, read_only=True)
    try:
        return con.execute("SELECT attempt_id, verdict, domain, subdomain, culprit_nodes, culprit_ranks, action, "
                           "root_cause.rule, len(evidence), input_fingerprint FROM attributions ORDER BY attempt_id").fetchall()
    finally:
        con.close()


def test_nightly_with_an_s3_lake_equals_local(tmp_path, s3_endpoint, bucket, capsys):
    write_demo(tmp_path / "demo")
    catalog = tmp_path / "catalog"
    for name in ("headline", "lost-gpu", "time-limit"):
        shutil.copytree(tmp_path / "demo" / "attempts" / name, catalog / name)
    cfg = tmp_path / "firstfault.toml"
    cfg.write_text(
        f'[lake]\nroot = "s3://lake/prod"\nendpoint_url = "{s3_endpoint}"\nkey = "foo"\nsecret = "foo"\nregion = "us-east-1"\n'
        f'[warehouse]\npath = "{tmp_path / "s3.duckdb"}"\n[catalog]\npaths = ["catalog/**/*.yaml"]\n'
    )
    config = load_config(str(cfg))
    assert config.lake.storage_options() == {"key": "foo", "secret": "foo",
                                             "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}
    assert main(["nightly", "--config", str(cfg), "--date", DAY, "--prefect", "never"]) == 0
    assert "attributed 3, failed 0" in capsys.readouterr().out
    assert bucket.ls("lake/prod")  # landed on S3
    assert bucket.glob("lake/prod/events/day=*/attempt_key=*/*.parquet")
    assert not bucket.exists("lake/prod/results") or not bucket.find("lake/prod/results")

    local = Config(lake=LakeSettings(root=str(tmp_path / "lake")), warehouse=WarehouseSettings(path=str(tmp_path / "local.duckdb")))
    assert run_nightly(local, DAY, str(catalog))["attributed"] == 3
    assert verdicts(str(tmp_path / "s3.duckdb")) == verdicts(str(tmp_path / "local.duckdb"))
    # incremental on S3 too
    assert main(["nightly", "--config", str(cfg), "--date", DAY, "--prefect", "never", "--json"]) == 0
    assert '"skipped": 3' in capsys.readouterr().out


def test_a_run_killed_while_landing_on_s3_keeps_the_earlier_landing(tmp_path, s3_endpoint, bucket):
    """No rename on S3: the completion marker decides. A run killed after writing every file of its generation
    leaves the earlier generation readable; the next run replaces it and removes the killed run's files."""
    (tmp_path / "node-01.log").write_text(XID)
    (tmp_path / "attempt.yaml").write_text(
        f"workload_id: w\ncluster: c\nstate: FAILED\nstart: '{KILL_DAY}T01:00:00Z'\nend: '{KILL_DAY}T02:00:00Z'\n"
        "nodes: [node-01]\nlogs:\n  - {source: syslog, path: '{node}.log'}\n")
    cfg = tmp_path / "firstfault.toml"
    cfg.write_text(f'[lake]\nroot = "s3://lake/prod"\nendpoint_url = "{s3_endpoint}"\nkey = "foo"\nsecret = "foo"\n'
                   f'region = "us-east-1"\n[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n')
    attribute = ["attribute", "--config", str(cfg), "--static", str(tmp_path / "attempt.yaml")]
    assert main(attribute) == 0
    lake = Lake("s3://lake/prod", load_config(str(cfg)).lake.storage_options())
    key = "c~2Fw~2F0"
    before = {t: lake.read(t, KILL_DAY, key) for t in TABLES}
    files_before, verdict_before = lake.files("logs", KILL_DAY, key), verdicts(str(tmp_path / "w.duckdb"))

    (tmp_path / "node-01.log").write_text(XID + "Nov 29 01:11:00 node-01 kernel: a line the killed run lands\n")
    kill_during_landing("commit", attribute, tmp_path / "ready")
    assert len(bucket.glob(f"lake/prod/logs/day={KILL_DAY}/attempt_key={key}/part-*.parquet", refresh=True)) == 2
    assert lake.files("logs", KILL_DAY, key) == files_before
    assert {t: lake.read(t, KILL_DAY, key) for t in TABLES} == before
    assert verdicts(str(tmp_path / "w.duckdb")) == verdict_before

    assert main(attribute) == 0
    assert lake.read("logs", KILL_DAY, key).num_rows == before["logs"].num_rows + 1
    (marker,) = [n.rsplit("/", 1)[1] for n in bucket.ls(f"lake/prod/commits/day={KILL_DAY}/attempt_key={key}", refresh=True)]
    for table in TABLES:
        names = [n.rsplit("/", 1)[1] for n in bucket.find(f"lake/prod/{table}/day={KILL_DAY}/attempt_key={key}")]
        assert names in ([], [f"part-{marker.removesuffix('.json')}-0.parquet"]), (table, names)


def test_an_s3_object_has_one_fingerprint_whatever_was_listed_before(s3_endpoint, bucket, monkeypatch):
    """A shard on another host HEADs an object that discovery saw in a listing: both must name the same version."""
    import s3fs

    from firstfault.connectors.local_files import fingerprint

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "foo")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "foo")
    bucket.pipe("lake/logs/node-01.log", b"line\n")
    s3fs.S3FileSystem.clear_instance_cache()
    headed = fingerprint("s3://lake/logs/node-01.log")
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.find("lake/logs")  # the listing fills the instance's cache with the listing's keys
    listed = fingerprint("s3://lake/logs/node-01.log")
    assert headed == listed and headed.startswith("5:")
    bucket.pipe("lake/logs/node-01.log", b"other\n")
    s3fs.S3FileSystem.clear_instance_cache()
    assert fingerprint("s3://lake/logs/node-01.log") != headed
