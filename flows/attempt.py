"""On-demand attribution of workload attempts as a Prefect flow. The tasks call the same plain functions that
`firstfault attribute` calls directly when no Prefect API is configured, so a single job never pays for a server."""
from __future__ import annotations

from firstfault.connectors.static_context import load_static_context
from firstfault.flows.artifacts import publish_artifacts
from prefect import flow, task

from firstfault.config import resolve_config
from firstfault.run import run_attempts


@task(name="attribute-attempts")
def attribute_attempts(spec_paths: list[str], config_path: str | None, lake_root: str | None, warehouse_path: str | None) -> list[str]:
    """Land, attribute and store the attempts (one task: they share the landing pass and the rule pass)."""
    config = resolve_config(config_path, lake_root=lake_root, warehouse_path=warehouse_path)
    contexts = [load_static_context(p, config.api) for p in spec_paths]
    run_attempts(contexts, config, flow="attribute-attempt")
    return [c.attempt_id for c in contexts]


@flow(name="attribute-attempt")
def attribute_attempt(
    spec_paths: list[str], config_path: str | None = None, lake_root: str | None = None, warehouse_path: str | None = None
) -> list[str]:
    attempt_ids = attribute_attempts(spec_paths, config_path, lake_root, warehouse_path)
    publish_artifacts(resolve_config(config_path, warehouse_path=warehouse_path).warehouse.path)
    return attempt_ids
