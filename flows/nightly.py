"""The nightly fleet run as a Prefect flow: one task per shard of attempts (never per attempt), paths between tasks,
one final single-writer task. The work is the plain functions of firstfault/nightly.py.

Task runners: the default thread pool, or Dask (`task_runner("dask")`: a local cluster of worker processes, or
`address="tcp://scheduler:8786"` for a running cluster whose workers have firstfault installed).
"""
from __future__ import annotations

from collections.abc import Sequence

import httpx

from prefect import flow, task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_run_logger
from prefect.settings import get_current_settings
from prefect.task_runners import ThreadPoolTaskRunner

from firstfault import progress
from firstfault.config import Config, resolve_config
from firstfault.errors import BadInput
from firstfault.flows.artifacts import publish_artifacts
from firstfault.flows.temporary_api import prefect_api
from firstfault.nightly import (
    Candidate,
    Plan,
    claim_results,
    load_results,
    locked_nights,
    night_range,
    parse_run_date,
    render_summary,
    run_shard,
    shard_failure_rows,
)

FLOW_NAME = "nightly"
DEPLOYMENT_NAME = "nightly"


@task(name="nightly-shard", cache_policy=NO_CACHE)
def shard_task(index: int, candidates: Sequence[Candidate], config: Config, run_id: str) -> str:
    """Land + attribute one shard; returns the URL of the folder its result tables were written to."""
    return run_shard(index, candidates, config, run_id)


@task(name="nightly-load", cache_policy=NO_CACHE)
def load_task(shard_urls: list[str], plan: Plan, config: Config, extra_failures: list[dict], last: bool = True,
              rebuild_after: bool = False) -> dict:
    """The single warehouse writer (runs after every shard) and the fleet aggregates."""
    return load_results(shard_urls, plan, config, flow=FLOW_NAME, extra_failures=extra_failures, last=last,
                        rebuild_after=rebuild_after)


@flow(name=FLOW_NAME)
def nightly(run_date: str | None = None, config_path: str | None = None, catalog: str | None = None,
            lake_root: str | None = None, warehouse_path: str | None = None, force: bool = False, shards: int = 0,
            until: str | None = None) -> list[dict]:
    """Attribute every attempt that ended on run_date (UTC, default yesterday) in the catalog; with `until`, every
    night from run_date to until (inclusive), one warehouse load per night. Returns a summary per night."""
    logger = get_run_logger()
    config = resolve_config(config_path, lake_root=lake_root, warehouse_path=warehouse_path)
    days = night_range(run_date, until) if until else [parse_run_date(run_date)]
    summaries = []
    with locked_nights(config, days, catalog, force, shards) as plans:
        for night, plan in enumerate(plans, 1):
            claim_results(config, plan.run_id)
            logger.info("nightly %s: %d attempts found, %d unchanged, %d to do in %d shards, %d failed discovery",
                        plan.run_date, plan.found, len(plan.skipped), len(plan.todo), len(plan.shards), len(plan.failures))
            futures = shard_task.map(list(range(len(plan.shards))), plan.shards, unmapped(config), unmapped(plan.run_id))
            urls, lost = [], []
            with progress.stage(f"nightly {plan.run_date}: land + attribute", total=len(plan.todo)) as done:
                for shard, future in zip(plan.shards, futures):
                    future.wait()
                    if future.state.is_completed():
                        urls.append(future.result())
                    else:  # the task itself died (worker lost, lake unwritable): its attempts are recorded, the others load
                        error = future.state.message or "shard task failed"
                        logger.warning("nightly: shard of %d attempts failed: %s", len(shard), error)
                        lost.extend(shard_failure_rows(shard, error))
                    done.advance(len(shard), sum(c.log_bytes for c in shard))
            with progress.stage(f"nightly {plan.run_date}: load into the warehouse") as loaded:
                summaries.append(load_task(urls, plan, config, lost, night == len(plans), any(s["attributed"] for s in summaries)))
                loaded.advance(summaries[-1]["attributed"])
            logger.info("%s", render_summary(summaries[-1]))
    publish_artifacts(config.warehouse.path)
    return summaries


def task_runner(runner: str = "local", address: str | None = None, workers: int = 2):
    """`local`: Prefect's thread pool. `dask`: prefect-dask's DaskTaskRunner on `address` or on a temporary
    distributed.LocalCluster of `workers` processes with one thread each."""
    if runner == "local":
        return ThreadPoolTaskRunner()
    if runner == "dask":
        # imported on use: prefect-dask loads dask and distributed (~1 s), which a local run never needs
        from prefect_dask import DaskTaskRunner

        if address:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(cluster_class="distributed.LocalCluster",
                              cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                              "dashboard_address": None})
    raise ValueError(f"unknown runner {runner!r} (local or dask)")


def run(runner: str = "local", address: str | None = None, **parameters) -> dict:
    with prefect_api():
        return nightly.with_options(task_runner=task_runner(runner, address))(**parameters)


def deployment(config_path: str | None = None, name: str = DEPLOYMENT_NAME, cron: str | None = None, **parameters):
    """The scheduled deployment `firstfault serve` serves (a RunnerDeployment: data, nothing started)."""
    config = resolve_config(config_path)
    params = {"config_path": config_path, **{k: v for k, v in parameters.items() if v not in (None, False, 0)}}
    return nightly.to_deployment(name=name, cron=cron or config.schedule.cron, parameters=params,
                                 description="firstfault nightly: attribute the attempts that ended yesterday (UTC)")


def serve(config_path: str | None = None, name: str = DEPLOYMENT_NAME, cron: str | None = None, **parameters) -> None:
    """Register the deployment with the configured Prefect server and run its scheduled runs until stopped."""
    config = resolve_config(config_path)
    require_scheduling_server()
    params = {"config_path": config_path, **{k: v for k, v in parameters.items() if v not in (None, False, 0)}}
    nightly.serve(name=name, cron=cron or config.schedule.cron, parameters=params, pause_on_shutdown=False)


START_A_SERVER = "start one with `prefect server start` and export PREFECT_API_URL=http://127.0.0.1:4200/api"


def require_scheduling_server(timeout_s: float = 5.0) -> str:
    """The URL of the Prefect API that will schedule the deployment. Without one Prefect would start a temporary
    server, which runs no scheduler: `serve` would then wait forever for runs that never come."""
    url = get_current_settings().api.url
    if not url:
        raise BadInput("<environment>", "PREFECT_API_URL", f"not set: serve needs a Prefect server to schedule runs; {START_A_SERVER}")
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=timeout_s).raise_for_status()
    except httpx.HTTPError as e:
        raise BadInput("<environment>", "PREFECT_API_URL", f"no Prefect server answers at {url} ({type(e).__name__}); "
                       f"{START_A_SERVER}") from None
    return url
