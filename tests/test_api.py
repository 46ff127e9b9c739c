"""`firstfault api`: the real server on a free port; its verdict for the headline context equals the CLI's."""
import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import uvicorn
import yaml

from firstfault.api import create_app
from firstfault.cli import main
from firstfault.config import ApiSettings, resolve_config

TOKEN = "test-token-0123456789"


def with_api(config, **api):
    """`config` with [api] settings for a test (allowed_roots and limits)."""
    return dataclasses.replace(config, api=ApiSettings(**api))


class Server:
    """uvicorn serving create_app(config, token) in a background thread, on a port the OS picks; requests carry the token."""

    def __init__(self, config, token=TOKEN):
        self.token = token
        self.server = uvicorn.Server(uvicorn.Config(create_app(config, token), host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the API server did not start")
            self.thread.join(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)

    def request(self, method: str, path: str, body=None, headers=None) -> tuple[int, object]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **({"Authorization": f"Bearer {self.token}"} if self.token else {})}
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={**sent, **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            assert e.headers["Content-Type"] == "application/json"
            return e.code, json.loads(e.read())


@pytest.fixture()
def api(tmp_path, demo_dir):
    config = resolve_config(None, lake_root=str(tmp_path / "api-lake"), warehouse_path=str(tmp_path / "api.duckdb"))
    with Server(with_api(config, allowed_roots=(str(demo_dir),))) as server:
        yield server


def test_headline_over_http_equals_the_cli(api, demo_dir, tmp_path, capsys):
    headline = demo_dir / "attempts" / "headline"
    assert main(["attribute", "--static", str(headline / "attempt.yaml"), "--json", "--warehouse", str(tmp_path / "cli.duckdb"),
                 "--lake", str(tmp_path / "cli-lake")]) == 0
    expected = json.loads(capsys.readouterr().out)

    assert api.request("GET", "/healthz") == (200, {"status": "ok"})
    context = {**yaml.safe_load((headline / "attempt.yaml").read_text()), "base_dir": str(headline)}
    status, verdict = api.request("POST", "/v1/attribute", context)
    assert status == 200
    # the same files give the same verdict: nothing in it depends on when or through which door it was attributed
    assert verdict == expected
    assert (verdict["verdict"], verdict["subdomain"], verdict["culprit_nodes"]) == ("attributed", "gpu_nvlink", ["node-02"])

    assert api.request("GET", f"/v1/attempts/{verdict['attempt_id']}") == (200, verdict)
    status, body = api.request("GET", "/v1/attempts/demo/no-such-workload/0")
    assert status == 404 and "demo/no-such-workload/0" in body["error"]
    assert str(tmp_path) not in body["error"]  # no server paths in a response


def test_concurrent_requests_share_the_warehouse(api, demo_dir):
    """Attributions queue for the single writer while reads go on; none of them fails on DuckDB's file lock."""
    contexts = [{**yaml.safe_load((demo_dir / "attempts" / name / "attempt.yaml").read_text()),
                 "base_dir": str(demo_dir / "attempts" / name)} for name in ("headline", "lost-gpu", "headline")]
    assert api.request("POST", "/v1/attribute", contexts[0])[0] == 200
    with ThreadPoolExecutor(max_workers=len(contexts) + 2) as pool:
        posts = [pool.submit(api.request, "POST", "/v1/attribute", c) for c in contexts]

        def read_while_attributing():
            replies = []
            while not all(p.done() for p in posts):
                replies.append(api.request("GET", "/v1/attempts/demo/demo-headline/0"))
                time.sleep(0.05)
            return replies

        readers = [pool.submit(read_while_attributing) for _ in range(2)]
        gets = [reply for r in readers for reply in r.result()]
        assert [p.result()[0] for p in posts] == [200] * len(posts)
    assert [p.result()[1]["subdomain"] for p in posts] == ["gpu_nvlink", "gpu_lost", "gpu_nvlink"]
    assert gets and {status for status, _ in gets} == {200}


@pytest.mark.parametrize(("body", "names"), [
    ({"workload_id": "w", "start": "2026-11-29T01:00:00Z"}, "field 'nodes': required"),
    ({"workload_id": "w", "start": "yesterday", "nodes": ["n1"]}, "field 'start': not an ISO 8601 timestamp"),
    ({"workload_id": "w", "start": "2026-11-29T01:00:00Z", "nodes": ["n1"], "base_dir": 7}, "field 'base_dir'"),
    (b"{not json", "not valid JSON"),
    ([1, 2], "must be a JSON object"),
    ({"slurm": "123", "nodes": ["n1"]}, "field 'nodes': cannot be combined with 'slurm'"),
    ({"scheduler": "nosuch:42"}, "field 'scheduler': no 'nosuch' scheduler connector is enabled"),
    ({"scheduler": "no-ref"}, "field 'scheduler': 'no-ref': expected NAME:REF"),
])
def test_bad_request_is_400_naming_the_field(api, body, names):
    status, reply = api.request("POST", "/v1/attribute", body)
    assert status == 400 and set(reply) == {"error"}
    assert reply["error"].startswith("request body: ") and names in reply["error"]


START = "2026-11-29T01:00:00Z"


def test_a_scheduler_mapping_makes_a_static_context_and_a_string_a_scheduler_id(api):
    facts = {"name": "slurm", "ref": "4242", "partition": "gpu"}
    status, verdict = api.request("POST", "/v1/attribute", {"workload_id": "w", "start": START, "nodes": ["n1"], "scheduler": facts})
    assert status == 200 and verdict["attempt_id"] == "default/w/0", verdict
    status, reply = api.request("POST", "/v1/attribute", {"scheduler": "slurm:4242"})
    assert status == 400 and "field 'scheduler': no 'slurm' scheduler connector is enabled" in reply["error"]


@pytest.mark.parametrize(("scheduler", "names"), [
    ({"pods": [{"namespace": "ml", "name": "p-0", "node": "n1", "containers": ["trainer"]}]}, "field 'scheduler.pods'"),
    ({"pods": []}, "field 'scheduler.pods'"),
    ({"name": "kueue", "ref": "ml/w"}, "field 'scheduler.name'"),
    ({"name": " Kueue "}, "field 'scheduler.name'"),
])
def test_a_posted_context_cannot_make_the_server_fetch_from_kubernetes(api, scheduler, names):
    status, reply = api.request("POST", "/v1/attribute", {"workload_id": "w", "start": START, "nodes": ["n1"], "scheduler": scheduler})
    assert status == 400 and names in reply["error"] and "Kubernetes" in reply["error"], reply


def test_internal_error_is_500_json_without_traceback(tmp_path):
    broken = tmp_path / "warehouse-is-a-folder"
    broken.mkdir()
    with Server(resolve_config(None, warehouse_path=str(broken))) as server:
        status, reply = server.request("GET", "/v1/attempts/demo/w/0")
    assert status == 500 and set(reply) == {"error"}
    assert reply["error"].startswith("internal error: ") and "Traceback" not in reply["error"]
    assert str(tmp_path) not in reply["error"]  # no server paths in a response


def test_api_command_rejects_a_bad_port(capsys):
    assert main(["api", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


# --- GET /v1/attempts: the list, paged and filtered ------------------------------------------------------------------

LISTED = [  # attempt, verdict, domain, nodes, start (None: unknown)
    ("t/w1/0", "attributed", "hardware", ["n1", "n2"], "2026-11-28T01:00:00"),
    ("t/w2/0", "attributed", "network", ["n2", "n3"], "2026-11-29T01:00:00"),
    ("t/w3/0", "unattributed", None, ["n3"], "2026-11-29T05:00:00"),
    ("t/w4/0", "not_failed", None, ["n1"], None),
]


@pytest.fixture()
def listed(tmp_path):
    from firstfault.warehouse.store import connect_writer

    path = tmp_path / "listed.duckdb"
    con = connect_writer(str(path))
    for attempt_id, verdict, domain, nodes, start in reversed(LISTED):  # stored in another order than listed
        con.execute("""INSERT INTO attributions BY NAME SELECT ? AS attempt_id, 'w' AS workload_id, 0 AS attempt, 't' AS cluster, 'FAILED' AS state, ? AS verdict, ? AS domain, ?::VARCHAR[] AS nodes,
                           ?::TIMESTAMP AS start_ts, CAST(?::TIMESTAMP AS DATE)::VARCHAR AS day""",
                    [attempt_id, verdict, domain, nodes, start, start])
    con.close()
    with Server(resolve_config(None, warehouse_path=str(path))) as server:
        yield server


def listing(server, query="") -> tuple[int, dict]:
    return server.request("GET", "/v1/attempts" + query)


@pytest.mark.parametrize("query, expected", [
    ("", ["t/w3/0", "t/w2/0", "t/w1/0", "t/w4/0"]),  # newest start first, an unknown start last
    ("?verdict=attributed", ["t/w2/0", "t/w1/0"]),
    ("?domain=network", ["t/w2/0"]),
    ("?node=n1", ["t/w1/0", "t/w4/0"]),
    ("?day=2026-11-29", ["t/w3/0", "t/w2/0"]),
    ("?node=n2&verdict=attributed&day=2026-11-28", ["t/w1/0"]),
    ("?verdict=ambiguous", []),
])
def test_the_attempts_list_filters_by_verdict_domain_node_and_day(listed, query, expected):
    status, reply = listing(listed, query)
    assert status == 200, reply
    assert [a["attempt_id"] for a in reply["attempts"]] == expected
    assert reply["total"] == len(expected) and reply["next"] is None


def test_the_attempts_list_is_paged(listed):
    status, first = listing(listed, "?node=n3&limit=1")
    assert status == 200 and first["total"] == 2 and (first["offset"], first["limit"]) == (0, 1)
    assert [a["attempt_id"] for a in first["attempts"]] == ["t/w3/0"]
    assert first["next"] == "/v1/attempts?node=n3&limit=1&offset=1"
    status, second = listed.request("GET", first["next"])
    assert [a["attempt_id"] for a in second["attempts"]] == ["t/w2/0"] and second["next"] is None
    row = second["attempts"][0]
    assert (row["verdict"], row["domain"], row["day"], row["start"]) == ("attributed", "network", "2026-11-29", "2026-11-29T01:00:00.000Z")
    status, past = listing(listed, "?offset=10")
    assert status == 200 and past["attempts"] == [] and past["total"] == 4


@pytest.mark.parametrize("query, names", [
    ("?limit=0", "field 'limit': '0' is not a whole number from 1 to 1000"),
    ("?limit=1001", "field 'limit'"),
    ("?offset=-1", "field 'offset'"),
    ("?verdict=atributed", "field 'verdict': 'atributed' is not one of attributed, ambiguous, unattributed, not_failed"),
    ("?domain=gpu", "field 'domain'"),
    ("?day=2026-13-01", "field 'day': '2026-13-01' is not a UTC day YYYY-MM-DD"),
    ("?node=", "field 'node': empty"),
    ("?nodes=n1", "field 'nodes': unknown parameter"),
    ("?node=n1&node=n2", "field 'node': given more than once"),
])
def test_a_bad_attempts_query_is_400_naming_the_parameter(listed, query, names):
    status, reply = listing(listed, query)
    assert status == 400 and reply["error"].startswith("query string: ") and names in reply["error"], reply


def test_the_attempts_list_needs_the_token(listed):
    status, reply = listed.request("GET", "/v1/attempts", headers={"Authorization": "Bearer wrong"})
    assert status == 401 and "bearer token" in reply["error"]


def test_an_empty_attempt_id_points_at_the_list(listed):
    status, reply = listed.request("GET", "/v1/attempts/")
    assert status == 404 and "GET /v1/attempts lists the attempts" in reply["error"]
