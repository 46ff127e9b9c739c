"""The HTTP client every remote connector uses: timeouts, bounded retries with exponential back-off on transient
errors (timeouts, connection errors, 429, 5xx), no retry on other 4xx, credentials from the config or the
environment (never logged, never in an error message), TLS options. Failures raise ConnectorError with a reason
fit for a `connector_reports` row."""
from __future__ import annotations

import json
import logging
import os
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from firstfault.config import RemoteSettings

if TYPE_CHECKING:
    import httpx  # annotations only

log = logging.getLogger(__name__)

_TRANSIENT_STATUS = {429, 500, 502, 503, 504}
_MAX_BACKOFF_S = 30.0


class ConnectorError(Exception):
    """A backend answered with an error or not at all. `status` is the HTTP status (None: no answer)."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status

    @property
    def unreachable(self) -> bool:
        """No answer, or a gateway saying the backend is not there: the connector's other queries would fail the
        same way, so they are reported instead of each waiting out its retries (500 and 504 can be one heavy
        query's own failure)."""
        return self.status in (None, 502, 503)


class HttpClient:
    def __init__(self, settings: RemoteSettings, connector: str, transport: httpx.BaseTransport | None = None,
                 headers: dict[str, str] | None = None):
        # imported on use: httpx (and the click and rich of its command line) is ~80 ms of every start-up, and a
        # run over local files, like `attribute --static`, never makes a request
        import httpx

        self.settings = settings
        self.connector = connector
        self._client = httpx.Client(
            base_url=settings.url.rstrip("/"), timeout=settings.timeout_s, headers={**(headers or {}), **_auth_headers(settings)},
            auth=_basic_auth(settings), verify=_tls(settings), transport=transport, follow_redirects=True,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "HttpClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get_json(self, path: str, params: dict | None = None):
        with self.stream(path, params, preload=True) as response:
            pass
        try:
            return response.json()
        except ValueError:
            raise ConnectorError(f"{self.connector}: {path} did not return JSON", response.status_code) from None

    def send_json(self, method: str, path: str, body, content_type: str = "application/json") -> int:
        """A request with a JSON body (a webhook POST, a node PATCH), retried like a GET: a receiver may see it twice
        when an answer is lost, never not at all without a ConnectorError. Returns the HTTP status."""
        content = json.dumps(body, default=str).encode("utf-8")
        with self.stream(path, preload=True, method=method, content=content, headers={"Content-Type": content_type}) as response:
            return response.status_code

    @contextmanager
    def stream(self, path: str, params: dict | None = None, *, preload: bool = False, method: str = "GET",
               content: bytes | None = None, headers: dict[str, str] | None = None) -> Iterator[httpx.Response]:
        """GET (or `method` with `content`) with retries; yields the open (streaming) response of the first success.
        `preload` reads the whole body first, so a body cut short is retried too; otherwise a failure while the
        caller reads is not retried (it has consumed part of the body) and raises ConnectorError."""
        import httpx  # imported on use: see __init__

        attempt = 0
        while True:
            try:
                with self._client.stream(method, path, params=params, content=content, headers=headers) as response:
                    if response.status_code < 400:
                        if preload:
                            response.read()
                        try:
                            yield response
                        except httpx.TransportError as e:
                            raise ConnectorError(f"{self.connector}: {path}: answer cut short while reading "
                                                 f"({type(e).__name__})") from None
                        return
                    response.read()
                    if response.status_code not in _TRANSIENT_STATUS or attempt >= self.settings.retries:
                        raise ConnectorError(self._status_reason(path, response), response.status_code)
                    reason = f"HTTP {response.status_code}"
            except httpx.TimeoutException:
                if attempt >= self.settings.retries:
                    raise ConnectorError(f"{self.connector}: {path} timed out after {self.settings.timeout_s:g} s "
                                         f"({attempt + 1} tries)") from None
                reason = "timeout"
            except httpx.TransportError as e:
                if attempt >= self.settings.retries:
                    raise ConnectorError(f"{self.connector}: cannot reach {public_url(self.settings.url)}: {type(e).__name__} "
                                         f"({attempt + 1} tries)") from None
                reason = type(e).__name__
            delay = min(self.settings.backoff_s * 2 ** attempt, _MAX_BACKOFF_S)
            log.info("%s: %s on %s, retry %d in %.1f s", self.connector, reason, path, attempt + 1, delay)
            time.sleep(delay)
            attempt += 1

    def _status_reason(self, path: str, response: httpx.Response) -> str:
        body = response.text.strip().replace("\n", " ")[:200]
        return f"{self.connector}: HTTP {response.status_code} from {path}" + (f": {body}" if body else "")


def public_url(url: str) -> str:
    """The URL without user:password@ (what may appear in reports, locators and logs)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])) if "@" in parts.netloc else url


def _secret(value: str, env: str) -> str:
    return value or (os.environ.get(env, "") if env else "")


def _auth_headers(s: RemoteSettings) -> dict[str, str]:
    token = _secret(s.token, s.token_env)
    if not token and s.token_file:
        try:
            token = Path(s.token_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ConnectorError(f"token_file {s.token_file}: {e.strerror}") from None
    return {"Authorization": f"Bearer {token}"} if token else {}


def _basic_auth(s: RemoteSettings) -> tuple[str, str] | None:
    return (s.username, _secret("", s.password_env)) if s.username else None  # httpx sends a pair as Basic auth


def _tls(s: RemoteSettings) -> ssl.SSLContext | bool:
    if s.insecure_skip_verify:
        return False
    if not (s.ca_file or s.cert_file):
        return True
    try:
        context = ssl.create_default_context(cafile=s.ca_file or None)
        if s.cert_file:
            context.load_cert_chain(s.cert_file, s.key_file or None)
    except OSError as e:  # ssl.SSLError included: a missing or malformed CA bundle or client certificate
        raise ConnectorError(f"TLS files (ca_file, cert_file, key_file): {e}") from None
    return context
