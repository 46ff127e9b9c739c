"""The shared HTTP client (connectors/http.py) against the fake backends: retries, no retry on 4xx, timeouts, answers
cut short, secrets kept out of logs and reasons."""
import logging
import socket

import pytest
from fake_backends import Fault, MemoryStream, fake_backends  # noqa: F401  (pytest fixture)

from firstfault.config import RemoteSettings
from firstfault.connectors.http import ConnectorError, HttpClient, public_url

LOKI = "/loki/api/v1/query_range"
QUERY = {"query": '{job="syslog"}', "start": 0, "end": 10, "limit": 10, "direction": "forward"}


def settings(url, **extra):
    return RemoteSettings(**{"url": url, "timeout_s": 2.0, "retries": 2, "backoff_s": 0.01, **extra})


@pytest.fixture()
def loki(fake_backends):  # noqa: F811
    fake_backends.streams.append(MemoryStream({"job": "syslog", "host": "node-01"}, [(1, "one"), (2, "two")]))
    return fake_backends


def test_server_error_is_retried_then_succeeds(loki):
    loki.faults.append(Fault(LOKI, status=500, times=1))
    with HttpClient(settings(loki.url), "loki") as client:
        body = client.get_json(LOKI, QUERY)
    assert [v[1] for v in body["data"]["result"][0]["values"]] == ["one", "two"]
    assert len(loki.requests_to(LOKI)) == 2


def test_unauthorized_is_not_retried(loki):
    loki.faults.append(Fault(LOKI, status=401, times=None))
    with HttpClient(settings(loki.url), "loki") as client, pytest.raises(ConnectorError) as failure:
        client.get_json(LOKI, QUERY)
    assert failure.value.status == 401 and "HTTP 401" in failure.value.reason
    assert len(loki.requests_to(LOKI)) == 1


def test_retries_stop_at_the_budget(loki):
    loki.faults.append(Fault(LOKI, status=503, times=None))
    with HttpClient(settings(loki.url), "loki") as client, pytest.raises(ConnectorError) as failure:
        client.get_json(LOKI, QUERY)
    assert failure.value.status == 503 and len(loki.requests_to(LOKI)) == 3  # 1 + retries


def test_slow_answer_times_out_after_the_retries(loki):
    loki.faults.append(Fault(LOKI, delay_s=1.0, times=None))
    with HttpClient(RemoteSettings(url=loki.url, timeout_s=0.2, retries=1, backoff_s=0.01), "loki") as client:
        with pytest.raises(ConnectorError) as failure:
            client.get_json(LOKI, QUERY)
    assert failure.value.status is None and "timed out after 0.2 s (2 tries)" in failure.value.reason


def test_body_cut_short_is_retried_when_preloaded_and_reported_when_streamed(loki):
    loki.faults.append(Fault(LOKI, truncate=True, times=1))
    with HttpClient(settings(loki.url), "loki") as client:
        assert client.get_json(LOKI, QUERY)["status"] == "success"
        assert len(loki.requests_to(LOKI)) == 2
        loki.faults.append(Fault(LOKI, truncate=True, times=1))
        with pytest.raises(ConnectorError) as failure:
            with client.stream(LOKI, QUERY) as response:
                b"".join(response.iter_bytes())
    assert "cut short" in failure.value.reason and len(loki.requests_to(LOKI)) == 3


def test_token_from_env_is_sent_but_never_logged(loki, monkeypatch, caplog):
    secret = "s3cr3t-token-value"
    monkeypatch.setenv("FF_TEST_TOKEN", secret)
    loki.faults.append(Fault(LOKI, status=500, times=1))
    loki.faults.append(Fault(LOKI, status=403, times=1))
    caplog.set_level(logging.DEBUG, logger="firstfault")  # a CLI run earlier in this process set its own level
    with HttpClient(settings(loki.url, token_env="FF_TEST_TOKEN"), "loki") as client, pytest.raises(ConnectorError) as failure:
        client.get_json(LOKI, QUERY)
    assert all(r["headers"]["Authorization"] == f"Bearer {secret}" for r in loki.requests_to(LOKI))
    assert secret not in caplog.text and secret not in failure.value.reason
    assert "retry 1" in caplog.text  # the retry was logged, without the credentials


def test_password_in_the_url_is_not_in_the_reason(caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.DEBUG, logger="firstfault")  # a CLI run earlier in this process set its own level
    with HttpClient(settings(f"http://admin:hunter2@127.0.0.1:{port}", retries=1), "loki") as client:
        with pytest.raises(ConnectorError) as failure:
            client.get_json(LOKI, QUERY)
    assert "cannot reach http://127.0.0.1:" in failure.value.reason
    assert "hunter2" not in failure.value.reason and "hunter2" not in caplog.text


def test_public_url_drops_only_the_user_info():
    assert public_url("https://u:p@loki.example:3100/x?y=1") == "https://loki.example:3100/x?y=1"
    assert public_url("http://[::1]:3100") == "http://[::1]:3100"


def test_unreadable_tls_files_are_a_connector_error(tmp_path):
    with pytest.raises(ConnectorError, match="TLS files"):
        HttpClient(RemoteSettings(url="https://loki.invalid", ca_file=str(tmp_path / "missing-ca.pem")), "loki")


@pytest.mark.parametrize("status, unreachable", [(None, True), (502, True), (503, True), (500, False), (400, False)])
def test_unreachable_means_no_answer_or_a_gateway_without_backend(status, unreachable):
    assert ConnectorError("x", status).unreachable is unreachable
