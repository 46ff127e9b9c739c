"""The input fingerprint of an attempt: what an incremental (nightly) run compares to decide an attempt is unchanged."""
from __future__ import annotations

import hashlib

import fsspec

from firstfault.connectors.local_files import LogFile, files_bytes, fingerprint, resolve_logs, resolve_paths
from firstfault.connectors.static_context import AttemptContext


def input_fingerprint(ctx: AttemptContext, storage_options: dict | None = None) -> str:
    """sha256 over the spec file's bytes and the sorted (uri, fingerprint) pairs of every log, metrics and
    flight-recorder file the spec resolves to. A changed, added or removed input file changes it."""
    return _fingerprint(ctx, resolve_logs(ctx)[0], storage_options)


def input_identity(ctx: AttemptContext) -> tuple[str, int]:
    """(input_fingerprint, bytes of the log files), from one listing of the inputs (nightly discovery)."""
    files, _ = resolve_logs(ctx)
    return _fingerprint(ctx, files), files_bytes(files)


def _fingerprint(ctx: AttemptContext, files: list[LogFile], storage_options: dict | None = None) -> str:
    h = hashlib.sha256()
    if ctx.spec_uri:
        with fsspec.open(ctx.spec_uri, "rb", **(storage_options or {})) as f:
            h.update(f.read())
    uris = {f.uri for f in files}
    uris.update(resolve_paths(ctx, ctx.metrics)[0])
    uris.update(resolve_paths(ctx, ctx.flight_recorder)[0])
    for uri in sorted(uris):
        h.update(b"\n" + uri.encode() + b"\t" + fingerprint(uri).encode())
    return h.hexdigest()


def safe_input_fingerprint(ctx: AttemptContext) -> str | None:
    """input_fingerprint, or None when the inputs cannot be listed (then the next incremental run redoes the attempt)."""
    try:
        return input_fingerprint(ctx)
    except Exception:
        return None
