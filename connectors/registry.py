"""Which connectors a run uses: the built-in ones the config enables, then plug-ins from package entry points.

A plug-in package declares, in its pyproject.toml,

    [project.entry-points."firstfault.sources"]      # or "firstfault.schedulers"
    mytsdb = "mypkg.firstfault_plugin:from_config"

where `from_config(config)` returns a SourceConnector / SchedulerConnector (connectors/base.py), or None when the
config does not enable it. Its settings live in firstfault.toml under `[plugins.mytsdb]` (`config.plugins["mytsdb"]`).
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points

from firstfault.config import Config
from firstfault.connectors.base import SchedulerConnector, SourceConnector, save_context
from firstfault.errors import BadInput
from firstfault.lake import Lake

SOURCE_GROUP = "firstfault.sources"
SCHEDULER_GROUP = "firstfault.schedulers"
# Built-ins are found the same way as plug-ins: a module with `from_config(config)`. A module is imported only when
# its config section is set (the HTTP clients cost a short command's start-up otherwise); its from_config decides.
BUILTIN_SOURCES: dict[str, Callable[[Config], object]] = {
    "loki": lambda c: c.loki.url, "k8s_logs": lambda c: c.kubernetes.url, "prometheus": lambda c: c.prometheus.url,
    "k8s_status": lambda c: True,
}
BUILTIN_SCHEDULERS: dict[str, Callable[[Config], object]] = {
    "kueue": lambda c: c.kueue.documents or c.kubernetes.url, "slurm": lambda c: c.slurm.enabled,
}


def source_connectors(config: Config) -> list[SourceConnector]:
    return _connectors(config, BUILTIN_SOURCES, SOURCE_GROUP, SourceConnector)


def scheduler_connectors(config: Config) -> dict[str, SchedulerConnector]:
    return {c.name: c for c in _connectors(config, BUILTIN_SCHEDULERS, SCHEDULER_GROUP, SchedulerConnector)}


def _connectors(config: Config, builtins: dict[str, Callable[[Config], object]], group: str, kind: type) -> list:
    modules = [import_module(f"firstfault.connectors.{name}") for name, configured in builtins.items() if configured(config)]
    factories = [(m.__name__, m.from_config) for m in modules]
    for ep in _entry_points(group, tuple(sys.path)):
        try:
            factories.append((f"{group}:{ep.name}", ep.load()))
        except Exception as e:
            raise BadInput(f"entry point {ep.name} ({ep.value})", group, f"cannot be loaded: {type(e).__name__}: {e}") from None
    out = []
    for where, factory in factories:
        try:
            connector = factory(config)
        except BadInput:
            raise
        except Exception as e:  # settings a connector cannot start from ([plugins.NAME] keys missing, wrong types)
            raise BadInput(where, "from_config", f"failed: {type(e).__name__}: {e}") from None
        if connector is None:
            continue
        if not isinstance(connector, kind):
            raise BadInput(where, "from_config", f"returned {type(connector).__name__}, not a {kind.__name__}")
        out.append(connector)
    return out


@functools.cache
def _entry_points(group: str, search_path: tuple[str, ...]) -> tuple:
    """The group's entry points, looked up once per search path: the look-up reads the metadata of every installed
    package (tens of ms), which an API process would otherwise pay on every request (a plug-in installed into a
    folder already on the path is seen by the next process)."""
    return tuple(sorted(entry_points(group=group), key=lambda e: e.name))


def resolve_scheduler_specs(config: Config, kind: str, value: str, where: str) -> list[str]:
    """Resolve a scheduler id to its attempts and keep each as a static context in the lake (their spec paths).
    `kind` is `slurm` / `kueue` (value: their id) or `scheduler` (value: NAME:REF); `where` names the flag or the
    request in errors. Shared by `attribute` and the HTTP API."""
    name, ref = value.partition(":")[::2] if kind == "scheduler" else (kind, value)
    if not name or not ref:
        raise BadInput(where, kind, f"{value!r}: expected {'NAME:REF' if kind == 'scheduler' else 'a scheduler id'}")
    connectors = scheduler_connectors(config)
    if name not in connectors:
        known = ", ".join(sorted(connectors)) or "none"
        raise BadInput(where, kind, f"no {name!r} scheduler connector is enabled (enabled: {known}); see firstfault.toml [{name}]")
    contexts = connectors[name].resolve(ref)
    if not contexts:
        raise BadInput(where, kind, f"{ref!r}: no attempt found")
    lake = Lake(config.lake.root, config.lake.storage_options())
    return [save_context(lake, ctx) for ctx in contexts]
