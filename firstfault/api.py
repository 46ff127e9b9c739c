"""`firstfault api`: attribution over HTTP for tools that cannot run the CLI (incident bots, schedulers' epilogs).

    POST /v1/attribute          a static context (the keys of docs/static-context.md as JSON, relative paths resolved against
                                `base_dir` or the server's working directory) -> its verdict object;
                                {"slurm": "JOBID[:ATTEMPT]"} | {"kueue": "NS/WL"} | {"scheduler": "NAME:REF"}
                                -> a list of verdict objects (one id may name several attempts: requeues)
    GET  /v1/attempts           a page of the stored attempts, newest first, filtered by verdict, domain, node, day
    GET  /v1/attempts/{id}      the stored verdict of an attempt (ids contain `/`), 404 when there is none
    GET  /healthz               {"status": "ok"}

Errors are JSON `{"error": "..."}`: 400 for bad input (the same one-line message the CLI prints), 401 without the
bearer token, 404, 413 for a body over `[api] max_body_bytes`, 415 for a body that is not JSON, 503 past
`[api] timeout_s` or when the server is shutting down, 500 for internal errors (the traceback goes to the server's
log; neither it nor a server path goes into a response).

Trust (docs/security.md): every route but /healthz needs `Authorization: Bearer <[api] token>`; a request names
files only inside `[api] allowed_roots` and asks for no more work than the `[api]` limits allow.

Concurrency: the warehouse has one writer at a time, so attributions run one after the other (`_attribution`
lock). Inside one process DuckDB also refuses a read-write connection to a file that has read-only connections
open, and the reverse: reads and the warehouse load share a readers-writer lock, so reads wait only for the short
load, not for a whole attribution.

Shutdown: SIGTERM or SIGINT answers the attributions in flight with a 503 at once, closes the warehouse to writes
(a load already under way ends; none starts, so an attribution is stored whole or not at all) and ends the process
without waiting for the attribution threads: they may be blocked on a slow source, or inside DuckDB, whose teardown
at the interpreter's exit would wait for them (so the process ends at once when one is still running).
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from firstfault.config import DEFAULT_CONFIG, NO_CONFIG, ApiSettings, Config
from firstfault.connectors.registry import resolve_scheduler_specs
from firstfault.connectors.request_limits import check_base_dir, check_counts, check_paths, check_scheduler_facts
from firstfault.connectors.static_context import (
    AttemptContext,
    context_from_dict,
    load_static_context,
)
from firstfault.connectors.urls import follow_no_redirects
from firstfault.errors import BadInput
from firstfault.connectors.header_deadline import with_header_deadline
from firstfault.lake import Lake
from firstfault.rules_sql.prepared import WarmRulePass
from firstfault.run import lake_filesystem, load_rule_set, run_attempts
from firstfault.warehouse.attempt_list import attempt_query, list_attempts, next_page
from firstfault.warehouse.read import load_verdicts, stored_verdicts
from firstfault.warehouse.store import DamagedWarehouse

log = logging.getLogger(__name__)

REQUEST = "request body"
SCHEDULER_KEYS = ("slurm", "kueue", "scheduler")
JSON_TYPE = "application/json"


class Busy(Exception):
    """The attribution lock did not come free within the request's time limit."""


class ShuttingDown(Exception):
    """The server is stopping: no warehouse load starts any more."""


SHUTTING_DOWN = "the server is shutting down: this attribution was stopped and nothing of it is stored"


class ReadWriteLock:
    """Many readers or one writer; a waiting writer holds back new readers so a busy GET stream cannot starve it.
    Once closed, no write starts (ShuttingDown)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writers_waiting = 0
        self._writing = False
        self._closed = False

    def close(self, wait_s: float = 0.0) -> None:
        """Let no write start from now on; wait up to `wait_s` for one under way to end."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._writing, wait_s)

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing and not self._writers_waiting)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            self._cond.wait_for(lambda: self._closed or (not self._writing and self._readers == 0))
            self._writers_waiting -= 1
            if self._closed:
                self._cond.notify_all()
                raise ShuttingDown()
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class Attributor:
    """What the endpoints do, without HTTP: attribute requests and read stored verdicts of one warehouse."""

    def __init__(self, config: Config):
        self.config = config
        self._attribution = threading.Lock()
        self._rules = load_rule_set(config)
        # the rule pass's connection and reference tables, made once (a request's own tables are dropped after it)
        self._rule_pass = WarmRulePass(config.attribution, self._rules.version,
                                       lake_filesystem(Lake(config.lake.root, config.lake.storage_options())))
        self._warehouse = ReadWriteLock()

    def attribute(self, body: Any, deadline: float) -> dict | list[dict]:
        """Attribute a request; Busy when the attribution lock is not free before `deadline` (time.monotonic())."""
        if not isinstance(body, dict):
            raise BadInput(REQUEST, None, "must be a JSON object: a static context or one of " + ", ".join(SCHEDULER_KEYS))
        # a `scheduler` mapping is the static context's own key (docs/static-context.md); a string is a scheduler id
        scheduled = [k for k in SCHEDULER_KEYS if k in body and not (k == "scheduler" and isinstance(body[k], dict))]
        limits = self.config.api
        if not scheduled:  # checked before the lock: a refused request never waits behind another
            contexts = [_static_context(body, limits)]
        if not self._attribution.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise Busy()
        try:
            if scheduled:
                contexts = self._scheduled_contexts(body, scheduled)
                for ctx in contexts:
                    check_counts(ctx, limits, REQUEST)
            # attribution reads the history read-only: GETs go on until the write; the answer is read back on the
            # write's own connection (one open of the warehouse less per request)
            verdicts: list[dict] = []
            run_attempts(contexts, self.config, flow="api", rules=self._rules, write_lock=self._warehouse.writing(),
                         warm=self._rule_pass,
                         read_back=lambda con: verdicts.extend(load_verdicts(con, [c.attempt_id for c in contexts])))
        finally:
            self._attribution.release()
        return verdicts if scheduled else verdicts[0]

    def stop(self, wait_s: float = 0.0) -> None:
        """Store no more attributions; wait up to `wait_s` for a warehouse load under way to end."""
        self._warehouse.close(wait_s)

    def verdicts(self, attempt_ids: list[str]) -> list[dict]:
        """Stored verdicts (FileNotFoundError when the warehouse does not exist yet)."""
        with self._warehouse.reading():
            return stored_verdicts(self.config.warehouse.path, attempt_ids)

    def attempts(self, filters: dict[str, str], limit: int, offset: int) -> tuple[int, list[dict]]:
        """(matching attempts, this page of them); none while the warehouse does not exist yet."""
        with self._warehouse.reading():
            try:
                return list_attempts(self.config.warehouse.path, filters, limit, offset)
            except FileNotFoundError:
                return 0, []

    def _scheduled_contexts(self, body: dict, scheduled: list[str]) -> list[AttemptContext]:
        kind = scheduled[0]
        extra = sorted(set(body) - {kind})
        if extra:
            raise BadInput(REQUEST, extra[0], f"cannot be combined with {kind!r}: send a static context or one scheduler id")
        value = body[kind]
        if not isinstance(value, str) or not value.strip():
            raise BadInput(REQUEST, kind, "must be a non-empty string")
        return [load_static_context(spec) for spec in resolve_scheduler_specs(self.config, kind, value.strip(), REQUEST)]


def _static_context(body: dict, limits: ApiSettings) -> AttemptContext:
    """A static context from the request, within the server's limits; relative paths resolve against `base_dir`
    (itself relative to the server's working directory) or the working directory, and must stay in the allowed roots."""
    doc = dict(body)
    base_dir = doc.pop("base_dir", None)
    if base_dir is not None and (not isinstance(base_dir, str) or not base_dir.strip()):
        raise BadInput(REQUEST, "base_dir", "must be a folder path or URL")
    base = base_dir.strip() if base_dir else os.getcwd()
    if "://" not in base:
        base = os.path.abspath(base)
    if base_dir is not None:
        check_base_dir(base, limits, REQUEST)
    ctx = context_from_dict(doc, REQUEST, base)
    check_counts(ctx, limits, REQUEST)
    check_scheduler_facts(ctx, REQUEST)
    check_paths(ctx, limits, REQUEST)
    return ctx


def read_token(settings: ApiSettings, config_file: str) -> str:
    """The bearer token clients must send ("" when none is configured); BadInput when the named source is empty."""
    if settings.token_env:
        token = os.environ.get(settings.token_env, "").strip()
        if not token:
            raise BadInput(config_file, "api.token_env", f"the environment variable {settings.token_env} is not set or empty")
        return token
    if settings.token_file:
        try:
            token = Path(settings.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(config_file, "api.token_file", f"cannot read {settings.token_file}: {e}") from None
        if not token:
            raise BadInput(config_file, "api.token_file", f"{settings.token_file} is empty")
        return token
    return ""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(config: Config, token: str | None) -> FastAPI:
    """The app; `token` None serves without authentication (only ever on a loopback address, `--no-auth`).
    `app.state.stop(wait_s)` starts its shutdown (from a signal handler too)."""
    attributor = Attributor(config)
    limits = config.api
    expected = f"Bearer {token}".encode() if token is not None else None
    stopping = asyncio.Event()
    attributions: set[threading.Thread] = set()
    # /docs and /redoc would load Swagger UI's scripts from a CDN: off; /openapi.json stays (behind the token)
    app = FastAPI(title="firstfault", description="Why did this training attempt fail? (verdicts as in docs/verdict.md)",
                  docs_url=None, redoc_url=None)

    def stop(wait_s: float = 0.0) -> None:
        attributor.stop(wait_s)
        try:
            loop = asyncio.get_running_loop()  # the server's, when a signal handler calls this
        except RuntimeError:  # the server has ended: no request waits any more
            return
        loop.call_soon_threadsafe(stopping.set)

    app.state.stop = stop
    app.state.attributing = lambda: any(t.is_alive() for t in list(attributions))

    def reply(status: int, content: Any, headers: dict | None = None) -> Response:
        # the verdict exactly as `attribute --json` serialises it (Starlette's JSONResponse differs on NaN and non-JSON types)
        return Response(json.dumps(content, default=str), status_code=status, media_type=JSON_TYPE, headers=headers)

    @app.middleware("http")
    async def authenticate(request: Request, call_next):
        if expected is not None and request.url.path != "/healthz":
            sent = request.headers.get("authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(sent, expected):  # constant time: the token cannot be guessed byte by byte
                return reply(401, {"error": "missing or wrong bearer token (Authorization: Bearer ...)"},
                             {"WWW-Authenticate": "Bearer"})
        return await call_next(request)

    @app.exception_handler(BadInput)
    async def bad_input(request: Request, e: BadInput) -> Response:
        return reply(400, {"error": str(e)})

    @app.exception_handler(DamagedWarehouse)
    async def damaged_warehouse(request: Request, e: DamagedWarehouse) -> Response:
        log.error("%s", e)  # the server's file: named in its log, not in the answer
        return reply(503, {"error": "the server's warehouse is damaged and cannot be read (details in the server's log)"})

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> Response:
        return reply(e.status_code, {"error": e.detail})

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception) -> Response:
        # Starlette re-raises after this response is sent: uvicorn logs the traceback on the server side. The message
        # stays there too: it may name the server's files
        return reply(500, {"error": f"internal error: {type(e).__name__} (details in the server's log)"})

    @app.get("/healthz")
    def healthz() -> Response:
        return reply(200, {"status": "ok"})

    @app.post("/v1/attribute")
    async def post_attribute(request: Request) -> Response:
        deadline = time.monotonic() + limits.timeout_s
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != JSON_TYPE:
            return reply(415, {"error": f"request body: must be JSON (Content-Type: {JSON_TYPE})"})
        raw = await _read_body(request, limits.max_body_bytes)
        if raw is None:
            return reply(413, {"error": f"request body: over this server's limit of {limits.max_body_bytes} bytes ([api] max_body_bytes)"})
        try:
            body = json.loads(raw)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a number of more than 4,300 digits
            raise BadInput(REQUEST, None, f"not valid JSON: {e}") from None
        except RecursionError:
            raise BadInput(REQUEST, None, "not valid JSON: nested too deeply") from None
        # attribution blocks (files, DuckDB, maybe a scheduler's API): off the event loop, one at a time
        work = _in_daemon_thread(attributions, attributor.attribute, body, deadline)
        shutdown = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({work, shutdown}, timeout=max(0.0, deadline - time.monotonic()),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            shutdown.cancel()
        late = reply(503, {"error": f"not done within this server's limit of {limits.timeout_s:g} s ([api] timeout_s)"})
        try:
            if work.done():
                return reply(200, work.result())
        except ShuttingDown:
            return reply(503, {"error": SHUTTING_DOWN})
        except Busy:
            return late
        if stopping.is_set():
            return reply(503, {"error": SHUTTING_DOWN})
        work.cancel()
        return late

    @app.get("/v1/attempts")
    def get_attempts(request: Request) -> Response:
        filters, limit, offset = attempt_query(request.query_params)
        total, page = attributor.attempts(filters, limit, offset)
        return reply(200, {"attempts": page, "total": total, "offset": offset, "limit": limit,
                           "next": next_page(filters, limit, offset, len(page), total)})

    @app.get("/v1/attempts/{attempt_id:path}")
    def get_attempt(attempt_id: str) -> Response:
        if not attempt_id:
            return reply(404, {"error": "no attempt id: GET /v1/attempts lists the attempts"})
        try:
            found = attributor.verdicts([attempt_id])
        except FileNotFoundError:
            found = []
        if not found:
            return reply(404, {"error": f"no verdict for attempt {attempt_id!r}"})
        return reply(200, found[0])

    return app


def _in_daemon_thread(running: set[threading.Thread], work: Callable, *args) -> asyncio.Future:
    """`work(*args)` in a thread of its own (in `running` while it runs), as a future of the running loop. A daemon
    thread: the process ends without waiting for an attribution still blocked on a slow source (its answer, if it
    comes, has nowhere to go)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(outcome: Any, failed: bool) -> None:
        if not future.done():  # answered already: timed out or shutting down
            (future.set_exception if failed else future.set_result)(outcome)

    def run() -> None:
        try:
            outcome, failed = work(*args), False
        except Exception as e:
            outcome, failed = e, True
        finally:
            running.discard(threading.current_thread())
        try:
            loop.call_soon_threadsafe(settle, outcome, failed)
        except RuntimeError:  # the loop is closed: the server has stopped
            pass

    thread = threading.Thread(target=run, name="firstfault-attribute", daemon=True)
    running.add(thread)
    thread.start()
    return future


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is longer than `limit` (a client may lie in Content-Length or send chunks)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


# after SIGTERM, requests in flight get this long (attributions are answered at once); uvicorn then raises the
# signal again and the process ends, an attribution still running with it
_SHUTDOWN_GRACE_S = 10
# how long the process waits at its end for a warehouse load under way (one transaction, short)
_LOAD_WAIT_S = 5


def _end_now(reason: BaseException | None) -> None:
    """End the process at once (its attribution threads with it), with the line and status the command line gives
    for `reason`: Ctrl-C 130, SIGTERM 143."""
    if reason is None:
        os._exit(0)
    interrupted = isinstance(reason, KeyboardInterrupt)
    print(f"firstfault: {'interrupted' if interrupted else 'terminated'}", file=sys.stderr, flush=True)
    os._exit(130 if interrupted else 143)


class _Server(uvicorn.Server):
    """uvicorn's server that starts the app's shutdown (`app.state.stop`) as soon as a signal asks it to stop."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]):
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def serve(config: Config, *, host: str = "127.0.0.1", port: int = 8080, no_auth: bool = False,
          config_file: str | None = DEFAULT_CONFIG) -> None:
    """Serve until SIGTERM or SIGINT; refuse to start without a token unless `no_auth` on a loopback address.
    `config_file`: the file `config` was read from (None: none was, every [api] setting is at its default)."""
    token = read_token(config.api, config_file or DEFAULT_CONFIG)
    if no_auth:
        if not is_loopback(host):
            raise BadInput("--no-auth", "host", f"serving without a token only on a loopback address, not {host!r}")
        token = None
    elif not token:
        unset = "set [api] token_env or token_file" if config_file else f"{NO_CONFIG} to set [api] token_env or token_file"
        raise BadInput(config_file or "--config", "api.token_env" if config_file else None,
                       f"no token: {unset} (or pass --no-auth to serve on a loopback address without one)")
    for key in ("max_body_bytes", "max_nodes", "max_ranks", "max_gpus_per_node", "max_paths", "max_files_per_glob",
                "max_bytes_per_attempt", "timeout_s", "header_timeout_s"):
        if getattr(config.api, key) <= 0:
            raise BadInput(config_file, f"api.{key}", "must be > 0")
    follow_no_redirects()
    app = create_app(config, token)
    server = _Server(uvicorn.Config(app, host=host, port=port, timeout_graceful_shutdown=_SHUTDOWN_GRACE_S,
                                    http=with_header_deadline(config.api.header_timeout_s)), app.state.stop)
    ended_by: BaseException | None = None
    try:
        server.run()
    except BaseException as e:  # the signal, raised again by uvicorn once it has stopped
        ended_by = e
        raise
    finally:
        app.state.stop(_LOAD_WAIT_S)
        if app.state.attributing():
            _end_now(ended_by)
    if not server.started:  # the port is taken, the address is not this host's: uvicorn logged why
        raise SystemExit(uvicorn.config.STARTUP_FAILURE)
