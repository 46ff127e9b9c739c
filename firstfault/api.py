"""`firstfault api`: attribution over HTTP for tools that cannot run the CLI (incident bots, schedulers' epilogs).

    POST /v1/attribute          a static context (the keys of docs/static-context.md as JSON, relative paths resolved against
                                `base_dir` or the server's working directory) -> its verdict object;
                                {"slurm": "JOBID[:ATTEMPT]"} | {"kueue": "NS/WL"} | {"scheduler": "NAME:REF"}
                                -> a list of verdict objects (one id may name several attempts: requeues)
    GET  /v1/attempts/{id}      the stored verdict of an attempt (ids contain `/`), 404 when there is none
    GET  /healthz               {"status": "ok"}

Errors are JSON `{"error": "..."}`: 400 for bad input (the same one-line message the CLI prints), 404, 500 for
internal errors (the traceback goes to the server's log, never into a response).

Concurrency: the warehouse has one writer at a time, so attributions run one after the other (`_attribution`
lock). Inside one process DuckDB also refuses a read-write connection to a file that has read-only connections
open, and the reverse: reads and the warehouse load share a readers-writer lock, so reads wait only for the short
load, not for a whole attribution.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from firstfault.config import Config
from firstfault.connectors.registry import resolve_scheduler_specs
from firstfault.connectors.static_context import (
    AttemptContext,
    context_from_dict,
    load_static_context,
)
from firstfault.errors import BadInput
from firstfault.run import load_rule_set, run_attempts
from firstfault.warehouse.read import stored_verdicts

REQUEST = "request body"
SCHEDULER_KEYS = ("slurm", "kueue", "scheduler")


class ReadWriteLock:
    """Many readers or one writer; a waiting writer holds back new readers so a busy GET stream cannot starve it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writers_waiting = 0
        self._writing = False

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
            self._cond.wait_for(lambda: not self._writing and self._readers == 0)
            self._writers_waiting -= 1
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
        self._warehouse = ReadWriteLock()

    def attribute(self, body: Any) -> dict | list[dict]:
        if not isinstance(body, dict):
            raise BadInput(REQUEST, None, "must be a JSON object: a static context or one of " + ", ".join(SCHEDULER_KEYS))
        scheduled = [k for k in SCHEDULER_KEYS if k in body]
        with self._attribution:
            contexts = self._scheduled_contexts(body, scheduled) if scheduled else [_static_context(body)]
            # attribution reads the history read-only: GETs go on until the write
            run_attempts(contexts, self.config, flow="api", rules=self._rules, write_lock=self._warehouse.writing())
        verdicts = self.verdicts([c.attempt_id for c in contexts])
        return verdicts if scheduled else verdicts[0]

    def verdicts(self, attempt_ids: list[str]) -> list[dict]:
        """Stored verdicts (FileNotFoundError when the warehouse does not exist yet)."""
        with self._warehouse.reading():
            return stored_verdicts(self.config.warehouse.path, attempt_ids)

    def _scheduled_contexts(self, body: dict, scheduled: list[str]) -> list[AttemptContext]:
        kind = scheduled[0]
        extra = sorted(set(body) - {kind})
        if extra:
            raise BadInput(REQUEST, extra[0], f"cannot be combined with {kind!r}: send a static context or one scheduler id")
        value = body[kind]
        if not isinstance(value, str) or not value.strip():
            raise BadInput(REQUEST, kind, "must be a non-empty string")
        return [load_static_context(spec) for spec in resolve_scheduler_specs(self.config, kind, value.strip(), REQUEST)]


def _static_context(body: dict) -> AttemptContext:
    """A static context from the request; relative paths resolve against `base_dir` (itself relative to the
    server's working directory) or the working directory."""
    doc = dict(body)
    base_dir = doc.pop("base_dir", None)
    if base_dir is not None and (not isinstance(base_dir, str) or not base_dir.strip()):
        raise BadInput(REQUEST, "base_dir", "must be a folder path or URL")
    base = base_dir.strip() if base_dir else os.getcwd()
    if "://" not in base:
        base = os.path.abspath(os.path.expanduser(base))
    return context_from_dict(doc, REQUEST, base)


def create_app(config: Config) -> FastAPI:
    attributor = Attributor(config)
    app = FastAPI(title="firstfault", description="Why did this training attempt fail? (verdicts as in docs/verdict.md)")

    def reply(status: int, content: Any) -> Response:
        # the verdict exactly as `attribute --json` serialises it (Starlette's JSONResponse differs on NaN and non-JSON types)
        return Response(json.dumps(content, default=str), status_code=status, media_type="application/json")

    @app.exception_handler(BadInput)
    async def bad_input(request: Request, e: BadInput) -> Response:
        return reply(400, {"error": str(e)})

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> Response:
        return reply(e.status_code, {"error": e.detail})

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception) -> Response:
        # Starlette re-raises after this response is sent: uvicorn logs the traceback on the server side
        return reply(500, {"error": f"internal error: {type(e).__name__}: {e}"})

    @app.get("/healthz")
    def healthz() -> Response:
        return reply(200, {"status": "ok"})

    @app.post("/v1/attribute")
    async def post_attribute(request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadInput(REQUEST, None, f"not valid JSON: {e}") from None
        # attribution blocks (files, DuckDB, maybe a scheduler's API): off the event loop, one at a time
        return reply(200, await run_in_threadpool(attributor.attribute, body))

    @app.get("/v1/attempts/{attempt_id:path}")
    def get_attempt(attempt_id: str) -> Response:
        try:
            found = attributor.verdicts([attempt_id])
        except FileNotFoundError:
            found = []
        if not found:
            return reply(404, {"error": f"no verdict for attempt {attempt_id!r} in {config.warehouse.path}"})
        return reply(200, found[0])

    return app


def serve(config: Config, *, host: str = "127.0.0.1", port: int = 8080) -> None:
    uvicorn.run(create_app(config), host=host, port=port)
