"""Which connectors a run uses: the built-in ones the config enables, then plug-ins from package entry points.

A plug-in package declares, in its pyproject.toml,

    [project.entry-points."firstfault.sources"]      # or "firstfault.schedulers"
    mytsdb = "mypkg.firstfault_plugin:from_config"

where `from_config(config)` returns a SourceConnector / SchedulerConnector (connectors/base.py), or None when the
config does not enable it. Its settings live in firstfault.toml under `[plugins.mytsdb]` (`config.plugins["mytsdb"]`).
"""
from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from firstfault.config import Config
from firstfault.connectors.base import SchedulerConnector, SourceConnector
from firstfault.errors import BadInput

SOURCE_GROUP = "firstfault.sources"
SCHEDULER_GROUP = "firstfault.schedulers"
# Built-ins are found the same way as plug-ins: a module with `from_config(config)`.
BUILTIN_SOURCES: tuple[str, ...] = ("firstfault.connectors.loki", "firstfault.connectors.k8s_logs", "firstfault.connectors.prometheus",
                                   "firstfault.connectors.k8s_status")
BUILTIN_SCHEDULERS: tuple[str, ...] = ("firstfault.connectors.kueue", "firstfault.connectors.slurm")


def source_connectors(config: Config) -> list[SourceConnector]:
    return _connectors(config, BUILTIN_SOURCES, SOURCE_GROUP, SourceConnector)


def scheduler_connectors(config: Config) -> dict[str, SchedulerConnector]:
    return {c.name: c for c in _connectors(config, BUILTIN_SCHEDULERS, SCHEDULER_GROUP, SchedulerConnector)}


def _connectors(config: Config, builtins: tuple[str, ...], group: str, kind: type) -> list:
    factories = [(m, import_module(m).from_config) for m in builtins]
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
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
