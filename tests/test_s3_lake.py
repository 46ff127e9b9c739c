"""The nightly run with the lake on S3 (moto's server): same verdicts as with the lake on local disk."""
import shutil

import duckdb
import pytest

from firstfault.cli import main
from firstfault.config import Config, LakeSettings, WarehouseSettings, load_config
from firstfault.synthetic.demo import write_demo
from firstfault.nightly import run_nightly

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
