"""`firstfault api` as an attacker sees it: real requests that must be refused (token, paths, sizes, counts, time),
and a server that will not start unprotected and stops on SIGTERM."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import yaml

from conftest import warehouse_rows
from firstfault.cli import main
from firstfault.config import ApiSettings, resolve_config
from firstfault.connectors.request_limits import Roots
from static_site import SECRET, StaticSite
from test_api import Server, with_api

START = "2026-11-29T01:00:00Z"


def context(**extra):
    return {"workload_id": "w", "start": START, "nodes": ["node-01"], **extra}


@pytest.fixture()
def root(tmp_path):
    """An allowed root holding one small log."""
    folder = tmp_path / "allowed"
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "app.log").write_text("hello\n")
    return folder


def server(tmp_path, **api):
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "w.duckdb"))
    return Server(with_api(config, **api))


def test_every_route_but_healthz_needs_the_bearer_token(tmp_path):
    with server(tmp_path) as api:
        for token in (None, "wrong", api.token + "x", ""):
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            api.token = None
            for method, path, body in [("POST", "/v1/attribute", context()), ("GET", "/v1/attempts/demo/w/0", None),
                                       ("GET", "/openapi.json", None), ("GET", "/no/such/route", None)]:
                status, reply = api.request(method, path, body, headers)
                assert status == 401 and "bearer token" in reply["error"], (token, path)
        assert api.request("GET", "/healthz") == (200, {"status": "ok"})
        api.token = "test-token-0123456789"
        assert api.request("GET", "/openapi.json")[0] == 200


def test_docs_ui_is_off_and_loads_no_outside_scripts(tmp_path):
    with server(tmp_path) as api:
        for path in ("/docs", "/redoc"):
            status, reply = api.request("GET", path)
            assert status == 404 and "cdn" not in str(reply).lower()


def test_only_json_bodies_within_the_size_limit(tmp_path):
    with server(tmp_path, max_body_bytes=1000) as api:
        status, reply = api.request("POST", "/v1/attribute", context(), headers={"Content-Type": "text/plain"})
        assert status == 415 and "application/json" in reply["error"]
        status, reply = api.request("POST", "/v1/attribute", context(), headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 415
        status, reply = api.request("POST", "/v1/attribute", b'{"x": "' + b"a" * 2000 + b'"}')
        assert status == 413 and "max_body_bytes" in reply["error"]
        status, reply = api.request("POST", "/v1/attribute", b"[" * 100_000 + b"]" * 100_000)
        assert status in (400, 413)
    with server(tmp_path) as api:  # the default limit lets a 100k-deep document through to the parser
        status, reply = api.request("POST", "/v1/attribute", b"[" * 100_000 + b"]" * 100_000)
        assert status == 400 and "nested too deeply" in reply["error"]


def test_no_allowed_roots_refuses_every_path_spec(tmp_path, root):
    with server(tmp_path) as api:
        for body in (context(logs=[{"path": str(root / "logs" / "app.log")}]), context(metrics=["m.csv"]),
                     context(flight_recorder=["fr/*"]), context(base_dir=str(root))):
            status, reply = api.request("POST", "/v1/attribute", body)
            assert status == 400 and "allowed_roots" in reply["error"], body


@pytest.mark.parametrize("logs, base_dir, says", [
    ([{"path": "/etc/passwd"}], None, "outside the allowed roots"),
    ([{"path": "../../../../etc/shadow"}], "ROOT", "'..'"),
    ([{"path": "logs/../../secret.log"}], "ROOT", "'..'"),
    ([{"path": "*.log"}], "/root", "outside the allowed roots"),
    ([{"path": "/**"}], None, "outside the allowed roots"),
    ([{"path": "http://169.254.169.254/latest/meta-data"}], None, "URLs are not allowed"),
    ([{"path": "s3://bucket/x.log"}], None, "URLs are not allowed"),
    ([{"path": "link/*.log"}], "ROOT", "outside the allowed roots"),
    ([{"path": "logs/*.log"}], "ROOT", "matches a file outside the allowed roots (a symlink?)"),
])
def test_request_paths_stay_inside_the_allowed_roots(tmp_path, root, logs, base_dir, says):
    (tmp_path / "secret.log").write_text("secret\n")
    os.symlink(tmp_path, root / "link")  # symlinks out of the root: a folder, and a file a glob matches
    os.symlink(tmp_path / "secret.log", root / "logs" / "evil.log")
    body = context(logs=logs, **({"base_dir": str(root) if base_dir == "ROOT" else base_dir} if base_dir else {}))
    with server(tmp_path, allowed_roots=(str(root),)) as api:
        status, reply = api.request("POST", "/v1/attribute", body)
    assert status == 400 and says in reply["error"], reply
    assert str(tmp_path) not in reply["error"]
    assert not (tmp_path / "lake").exists()  # nothing was landed


def test_a_path_inside_the_allowed_root_is_attributed(tmp_path, root):
    with server(tmp_path, allowed_roots=(str(root),)) as api:
        status, verdict = api.request("POST", "/v1/attribute", context(logs=[{"path": "logs/*.log"}], base_dir=str(root)))
    assert status == 200 and verdict["attempt_id"] == "default/w/0"


@pytest.mark.parametrize("extra, limits, says", [
    ({"nodes": [f"n{i}" for i in range(20)]}, {"max_nodes": 10}, "field 'nodes': 20 is over this server's limit of 10"),
    ({"gpus_per_node": 100}, {}, "field 'gpus_per_node': 100 is over this server's limit of 64"),
    ({"gpus_per_node": 1_000_000}, {}, "field 'gpus_per_node': must be <= 1024"),
    ({"nodes": [f"n{i}" for i in range(200)], "gpus_per_node": 64}, {},
     "field 'gpus_per_node': nodes x gpus_per_node = 12800 is over this server's limit of 8192 ([api] max_ranks)"),
    ({"ranks": [{"rank": r, "node": "node-01"} for r in range(20)]}, {"max_ranks": 10}, "field 'ranks'"),
    ({"logs": [{"path": f"logs/{i}.log"} for i in range(5)]}, {"max_paths": 4}, "max_paths"),
    ({"logs": [{"path": "many/*.log"}]}, {"max_files_per_glob": 3}, "matches 4 files"),
    ({"logs": [{"path": "many/*.log"}]}, {"max_bytes_per_attempt": 10}, "max_bytes_per_attempt"),
])
def test_counts_over_the_limits_are_400_and_fast(tmp_path, root, extra, limits, says):
    (root / "many").mkdir()
    for i in range(4):
        (root / "many" / f"{i}.log").write_text("a line\n")
    with server(tmp_path, allowed_roots=(str(root),), **limits) as api:
        started = time.monotonic()
        status, reply = api.request("POST", "/v1/attribute", {**context(base_dir=str(root)), **extra})
    assert status == 400 and says in reply["error"], reply
    assert time.monotonic() - started < 5


def test_a_request_past_the_time_limit_gets_503(tmp_path, demo_dir):
    headline = demo_dir / "attempts" / "headline"
    body = {**yaml.safe_load((headline / "attempt.yaml").read_text()), "base_dir": str(headline)}
    with server(tmp_path, allowed_roots=(str(demo_dir),), timeout_s=0.2) as api:
        started = time.monotonic()
        status, reply = api.request("POST", "/v1/attribute", body)
        assert status == 503 and "timeout_s" in reply["error"]
        assert time.monotonic() - started < 5


def test_the_server_refuses_to_start_unprotected(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["api", "--port", "0"]) == 2
    assert "no token" in capsys.readouterr().err
    assert main(["api", "--port", "0", "--no-auth", "--host", "0.0.0.0"]) == 2
    assert "loopback" in capsys.readouterr().err
    (tmp_path / "firstfault.toml").write_text('[api]\ntoken_env = "FIRSTFAULT_TEST_TOKEN"\n')
    monkeypatch.delenv("FIRSTFAULT_TEST_TOKEN", raising=False)
    assert main(["api", "--port", "0"]) == 2
    assert "FIRSTFAULT_TEST_TOKEN" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def api_process(tmp_path, api_settings=""):
    """`firstfault api` in its own process, serving once it answers; yields (process, base URL); killed at the end."""
    (tmp_path / "token").write_text("file-token\n")
    (tmp_path / "firstfault.toml").write_text(f'[api]\ntoken_file = "token"\n{api_settings}')
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "firstfault.cli", "api", "--port", str(port), "--config",
                             str(tmp_path / "firstfault.toml"), "--warehouse", str(tmp_path / "w.duckdb"), "--lake",
                             str(tmp_path / "lake")], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/openapi.json", headers={"Authorization": "Bearer file-token"})
                with urllib.request.urlopen(req, timeout=5) as response:
                    assert response.status == 200
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "slow"
                time.sleep(0.2)
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_stops_the_server(tmp_path):
    with api_process(tmp_path) as (proc, _):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM  # the CLI's exit status for SIGTERM


def test_the_server_follows_no_redirect_out_of_a_url_root(tmp_path, site):
    with api_process(tmp_path, f'allowed_roots = ["{site.url}/logs"]\n') as (proc, url):
        status, _, reply = post(url, context(nodes=["node-02"], logs=[{"source": "syslog", "path": site.url + "/logs/moved.log"}]))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert status in (200, 400) and SECRET.encode() not in reply, reply
    assert "/logs/moved.log" in site.asked and not any("secret" in asked for asked in site.asked), site.asked


def post(url, body):
    """(status, Content-Type, body) of a POST with the token."""
    req = urllib.request.Request(url + "/v1/attribute", data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": "Bearer file-token"})
    try:
        with urllib.request.urlopen(req, timeout=120) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


@pytest.mark.parametrize("read_goes_on", [False, True], ids=["read-hangs", "read-goes-on"])
def test_sigterm_during_an_attribution_ends_it_within_10_s_answers_json_and_stores_nothing(tmp_path, read_goes_on):
    with StaticSite(tmp_path / "site", stall_reads=True) as site, \
            api_process(tmp_path, f'allowed_roots = ["{site.url}/logs"]\n') as (proc, url), ThreadPoolExecutor(1) as pool:
        answer = pool.submit(post, url, context(nodes=["node-01"], logs=[{"source": "syslog", "path": site.url + "/logs/node-01.log"}]))
        assert site.stalled.wait(60), "the attribution never read its log"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        if read_goes_on:  # the attribution goes on to its load while the server stops: it must not store
            site.release()
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert time.monotonic() - started < 10
        status, media_type, reply = answer.result(timeout=30)
    assert status == 503 and media_type == "application/json", (status, reply)
    assert "shutting down" in json.loads(reply)["error"]
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "firstfault: terminated", err
    stored = warehouse_rows(tmp_path / "w.duckdb", "SELECT attempt_id FROM attributions") if (tmp_path / "w.duckdb").exists() else []
    assert stored == []


def test_url_paths_only_under_a_listed_url_prefix():
    roots = Roots.from_settings(ApiSettings(allowed_roots=("s3://bucket/logs/", "/data")))
    assert roots.holds("s3://bucket/logs") and roots.holds("s3://bucket/logs/job/1.log")
    assert not roots.holds("s3://bucket/logs-other/x") and not roots.holds("s3://bucket/x")
    assert not roots.holds("http://bucket/logs/x") and not roots.holds("/data-other/x") and roots.holds("/data/x")


def test_no_auth_serves_without_a_token(tmp_path):
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "w.duckdb"))
    with Server(with_api(config), token=None) as api:  # what `--no-auth` on a loopback address serves
        assert api.request("GET", "/v1/attempts/demo/w/0")[0] == 404


@pytest.fixture()
def site(tmp_path):
    with StaticSite(tmp_path / "site") as running:
        yield running


@pytest.mark.parametrize("path, base_dir, says", [
    ("{url}/logs/%2e%2e/secret/node-02.log", None, "'..'"),
    ("{url}/logs/%2E%2e/secret/node-02.log", None, "'..'"),
    ("{url}/logs/.%2e/secret/node-02.log", None, "'..'"),
    ("{url}/logs/%2e%2e/secret/*.log", None, "'..'"),
    ("{url}/logs/%2e/../secret/node-02.log", None, "'..'"),
    ("{url}/logs/..%2fsecret/node-02.log", None, "encoded separator"),
    ("{url}/logs/%2e%2e%2Fsecret%2fnode-02.log", None, "encoded separator"),
    ("{url}/logs/..%5csecret%5cnode-02.log", None, "encoded separator"),
    ("{url}/logs/%2e%2e\\secret\\node-02.log", None, "backslash"),
    ("{url}/logs/%252e%252e/secret/node-02.log", None, "percent-encoded twice"),
    ("{url}/logs/%ff%2e/node-02.log", None, "not UTF-8"),
    ("{url}/logs/x%00/node-02.log", None, "control characters"),
    ("{url}/logs/node-01.log#/%2e%2e/secret/node-02.log", None, "fragment"),
    ("{url}/logs/x::file:///etc/passwd", None, "chained URL"),
    ("node-02.log", "{url}/logs/%2e%2e/secret", "'..'"),
    ("node-02.log", "{url}/logs/%2e%2e/secret/", "'..'"),
    ("../secret/node-02.log", "{url}/logs", "'..'"),
    ("{url}/logs-other/node-02.log", None, "outside the allowed roots"),
    ("{url}/secret/node-02.log", None, "outside the allowed roots"),
])
def test_a_url_leaving_its_root_by_encoding_is_refused_and_never_fetched(tmp_path, site, path, base_dir, says):
    body = context(nodes=["node-01", "node-02"], logs=[{"path": path.format(url=site.url)}],
                   **({"base_dir": base_dir.format(url=site.url)} if base_dir else {}))
    with server(tmp_path, allowed_roots=(site.url + "/logs",)) as api:
        status, reply = api.request("POST", "/v1/attribute", body)
    assert status == 400 and says in reply["error"], reply
    assert not any("secret" in asked.lower() for asked in site.asked), site.asked
    assert SECRET not in str(reply)


def test_a_url_inside_its_root_is_fetched_as_written(tmp_path, site):
    with server(tmp_path, allowed_roots=(site.url + "/logs/",)) as api:
        status, verdict = api.request("POST", "/v1/attribute", context(
            nodes=["node-01", "node-02"], logs=[{"source": "syslog", "path": "node-01.log"}], base_dir=site.url + "/logs"))
    assert status == 200 and verdict["culprit_nodes"] == ["node-01"], verdict
    assert site.asked and set(site.asked) == {"/logs/node-01.log"}


def test_connections_that_send_no_whole_request_head_are_closed_after_the_header_timeout(tmp_path):
    with api_process(tmp_path, "header_timeout_s = 1.0\n") as (proc, url):
        port = int(url.rsplit(":", 1)[1])
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(50)]
        try:
            for i, s in enumerate(sockets[::2]):  # every other one sends half a request head, the rest nothing
                s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-{i}: ".encode())
            for s in sockets:
                s.settimeout(20)  # far past the 1 s deadline: a connection held for ever times out here
                try:
                    assert s.recv(1024) == b""
                except ConnectionResetError:
                    pass  # closed by the server all the same
        finally:
            for s in sockets:
                s.close()
        with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:  # a whole request is still answered
            assert json.loads(response.read()) == {"status": "ok"}
