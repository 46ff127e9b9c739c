"""What a static context sent by a client of `firstfault api` may name and ask for: files inside `[api]
allowed_roots` only (symlinks resolved, no `..`, URLs only under a listed URL prefix) and counts within the `[api]`
limits. The globs are expanded here, before anything is read, so a request that would match too many files or
bytes, or reach out of a root through a symlink or a percent-encoded `..`, is refused with a 400 instead of being
landed. URLs are compared as their fetcher reads them (connectors/urls.py)."""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

import fsspec

from firstfault.config import ApiSettings
from firstfault.connectors.local_files import resolve_paths
from firstfault.connectors.static_context import AttemptContext, check_sizes
from firstfault.connectors.urls import NotNormal, UrlKey, url_key
from firstfault.errors import BadInput

_GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Roots:
    """The allowed roots: local folders as resolved real paths, URL prefixes as their fetchers read them."""
    folders: tuple[str, ...]
    urls: tuple[UrlKey, ...]

    @classmethod
    def from_settings(cls, settings: ApiSettings) -> Roots:
        try:
            urls = tuple(url_key(r) for r in settings.allowed_roots if "://" in r)
        except NotNormal as e:
            raise BadInput("[api]", "allowed_roots", f"a URL prefix {e}") from None
        folders = tuple(os.path.realpath(os.path.expanduser(r)) for r in settings.allowed_roots if "://" not in r)
        return cls(folders, urls)

    def __bool__(self) -> bool:
        return bool(self.folders or self.urls)

    def holds(self, target: str) -> bool:
        """Whether `target` (a URL, or a local path whose symlinks are resolved here) lies inside a root; NotNormal
        for a URL whose path is ambiguous."""
        if "://" in target:
            key = url_key(target)
            return any(key.within(u) for u in self.urls)
        real = os.path.realpath(target)
        return any(real == f or real.startswith(f.rstrip("/") + "/") for f in self.folders)


def check_counts(ctx: AttemptContext, limits: ApiSettings, file: str) -> None:
    """Refuse an attempt bigger than the limits: the work it would cause grows with each of these counts."""
    check_sizes(ctx, limits, file, "this server's")
    paths = len(ctx.logs) + len(ctx.metrics) + len(ctx.flight_recorder)
    if paths > limits.max_paths:
        raise BadInput(file, "logs", f"logs, metrics and flight_recorder entries: {paths} is over this server's limit of "
                       f"{limits.max_paths} ([api] max_paths)")


def check_scheduler_facts(ctx: AttemptContext, file: str) -> None:
    """Refuse the `scheduler` facts that make connectors fetch on the server's own credentials, outside the allowed
    roots: `pods` (their logs from the Kubernetes API) and `name: kueue` (its recorded status)."""
    if "pods" in ctx.scheduler:
        raise BadInput(file, "scheduler.pods", "not accepted in a request: the server would fetch these pods' logs "
                       "from the Kubernetes API with its own credentials")
    if str(ctx.scheduler.get("name", "")).strip().lower() == "kueue":
        raise BadInput(file, "scheduler.name", "'kueue' is not accepted in a request: it stands for the Kueue "
                       "connector, which reads the Kubernetes API with the server's credentials (send {\"kueue\": \"NS/WL\"})")


def check_paths(ctx: AttemptContext, limits: ApiSettings, file: str) -> None:
    """Refuse a context whose paths leave the allowed roots, or match too many files or bytes."""
    roots = Roots.from_settings(limits)
    named = [(f"logs[{i}].path", spec.path) for i, spec in enumerate(ctx.logs)]
    named += [(f"metrics[{i}].path", p) for i, p in enumerate(ctx.metrics)]
    named += [(f"flight_recorder[{i}].path", p) for i, p in enumerate(ctx.flight_recorder)]
    if not named:
        return
    if not roots:
        raise BadInput(file, named[0][0], "this server reads no files named by a request ([api] allowed_roots is empty)")
    total = 0
    for field_, path in named:
        for rel in _expansions(path, ctx.nodes):
            _check_target(roots, field_, _target(ctx.base_uri, rel), file)
            files, _ = resolve_paths(ctx, (rel,))
            if len(files) > limits.max_files_per_glob:
                raise BadInput(file, field_, f"matches {len(files)} files, over this server's limit of "
                               f"{limits.max_files_per_glob} ([api] max_files_per_glob)")
            for uri in files:
                local = _local_path(uri)
                try:
                    inside = roots.holds(local if local is not None else uri)
                except NotNormal as e:
                    raise BadInput(file, field_, f"matches a URL that {e}") from None
                if not inside:
                    raise BadInput(file, field_, "matches a file outside the allowed roots (a symlink?)")
                total += _size(uri)
            if total > limits.max_bytes_per_attempt:
                raise BadInput(file, field_, f"the files named so far hold {total} bytes, over this server's limit of "
                               f"{limits.max_bytes_per_attempt} ([api] max_bytes_per_attempt)")


def check_base_dir(base: str, limits: ApiSettings, file: str) -> None:
    """The folder relative paths resolve against must itself lie in a root."""
    roots = Roots.from_settings(limits)
    if not roots:
        raise BadInput(file, "base_dir", "this server reads no files named by a request ([api] allowed_roots is empty)")
    _check_target(roots, "base_dir", base, file)


def _check_target(roots: Roots, field_: str, target: str, file: str) -> None:
    """The part of a path before its first wildcard must lie in a root, so a glob never walks outside them; a URL
    must be one whose path means one thing (connectors/urls.py), also after its wildcard."""
    if ".." in target.replace("\\", "/").split("/"):
        raise BadInput(file, field_, "must not contain '..'")
    if "://" in target:
        if not roots.urls:
            raise BadInput(file, field_, "URLs are not allowed on this server (no URL prefix in [api] allowed_roots)")
        try:
            url_key(target)
        except NotNormal as e:
            raise BadInput(file, field_, str(e)) from None
    fixed = target
    wildcard = min((i for i in (target.find(c) for c in _GLOB_CHARS) if i >= 0), default=-1)
    if wildcard >= 0:
        fixed = target[:wildcard].rpartition("/")[0] or "/"
    if not roots.holds(fixed):
        raise BadInput(file, field_, "is outside the allowed roots ([api] allowed_roots)")


def _expansions(path: str, nodes: tuple[str, ...]) -> list[str]:
    return [path.replace("{node}", n) for n in nodes] if "{node}" in path else [path]


def _target(base_uri: str, rel: str) -> str:
    return rel if "://" in rel or rel.startswith("/") else posixpath.join(base_uri, rel)


def _local_path(uri: str) -> str | None:
    if uri.startswith("file://"):
        return uri[len("file://"):]
    return None if "://" in uri else uri


def _size(uri: str) -> int:
    fs, path = fsspec.core.url_to_fs(uri)
    try:
        return int(fs.size(path) or 0)
    except OSError:
        return 0
