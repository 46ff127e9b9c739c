"""On-demand attribution of workload attempts as a Prefect flow. The tasks call the same plain functions that
`firstfault attribute` calls directly when no Prefect API is configured, so a single job never pays for a server."""
from __future__ import annotations

from datetime import datetime, timezone

from prefect import flow, task

from firstfault.config import resolve_config
from firstfault.connectors.static_context import load_static_context
from firstfault.flows.artifacts import publish_artifacts
from firstfault.run import attribute_and_store, land


@task(name="land-attempts")
def land_attempts(spec_paths: list[str], config_path: str | None, lake_root: str | None) -> int:
    config = resolve_config(config_path, lake_root=lake_root)
    return sum(r.log_rows for r in land([load_static_context(p) for p in spec_paths], config))


@task(name="attribute-and-load")
def attribute_and_load(
    spec_paths: list[str], config_path: str | None, lake_root: str | None, warehouse_path: str | None, started_at: datetime
) -> list[str]:
    config = resolve_config(config_path, lake_root=lake_root, warehouse_path=warehouse_path)
    contexts = [load_static_context(p) for p in spec_paths]
    attribute_and_store(contexts, config, flow="attribute-attempt", started_at=started_at)
    return [c.attempt_id for c in contexts]


@flow(name="attribute-attempt")
def attribute_attempt(
    spec_paths: list[str], config_path: str | None = None, lake_root: str | None = None, warehouse_path: str | None = None
) -> list[str]:
    started_at = datetime.now(timezone.utc)
    land_attempts(spec_paths, config_path, lake_root)
    attempt_ids = attribute_and_load(spec_paths, config_path, lake_root, warehouse_path, started_at)
    publish_artifacts(resolve_config(config_path, warehouse_path=warehouse_path).warehouse.path)
    return attempt_ids
