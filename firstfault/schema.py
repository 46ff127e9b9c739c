"""The tables firstfault writes, in one place (docs/tables.md): lake tables (logs, events, progress, metrics, context,
connector_reports, flight_recorder), rule hits, the history relation, the verdict keys, the warehouse tables a load
replaces and the fleet tables. Polars dtypes where polars builds the frame, Arrow where Arrow writes it."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import polars as pl
import pyarrow as pa

# --- lake ---------------------------------------------------------------------------------------------------------

#: one row per log line, every line (ad hoc SQL over raw lines)
LOGS_SCHEMA = pa.schema(
    [
        ("attempt_id", pa.string()), ("node", pa.string()), ("rank", pa.int32()), ("source", pa.string()),
        ("uri", pa.string()), ("line", pa.int64()), ("ts", pa.timestamp("us")), ("ts_quality", pa.string()),
        ("raw", pa.string()),
    ]
)

#: the normalised line frame event extraction reads
LINE_SCHEMA: dict[str, pl.DataType] = {
    "attempt_id": pl.String(),
    "source": pl.String(),
    "file_index": pl.Int32(),
    "uri": pl.String(),
    "line": pl.Int64(),
    "node": pl.String(),
    "rank": pl.Int32(),
    "local_rank": pl.Int32(),
    "ts": pl.Datetime("us"),
    "ts_quality": pl.String(),
    "msg": pl.String(),
    "raw": pl.String(),
}

#: training progress summarised (lake and warehouse `progress`): one row per attempt, file, node, rank and minute of
#: the markers' stamps (a null rank or minute is its own row); the markers themselves are not events, except each
#: rank's first and last (transforms/progress_summary.py)
PROGRESS_SCHEMA = pa.schema(
    [
        ("attempt_id", pa.string()), ("uri", pa.string()), ("node", pa.string()), ("rank", pa.int32()),
        ("minute", pa.timestamp("us")), ("markers", pa.int64()), ("iterations", pa.int64()),
        ("first_ts", pa.timestamp("us")), ("last_ts", pa.timestamp("us")), ("first_iteration", pa.int64()),
        ("last_iteration", pa.int64()), ("max_iteration", pa.int64()), ("first_event_id", pa.string()),
        ("last_event_id", pa.string()),
    ]
)

#: one row per extracted event (lake `events`; the warehouse adds `role`)
EVENT_SCHEMA: dict[str, pl.DataType] = {
    "attempt_id": pl.String(),
    "event_id": pl.String(),
    "kind": pl.String(),
    "code": pl.Int64(),
    "code_text": pl.String(),
    "severity": pl.String(),
    "node": pl.String(),
    "rank": pl.Int32(),
    "local_rank": pl.Int32(),
    "gpu": pl.String(),
    "ts": pl.Datetime("us"),
    "ts_quality": pl.String(),
    "message": pl.String(),
    "peer_addr": pl.String(),
    "peer_node": pl.String(),
    "device": pl.String(),
    "port": pl.Int32(),
    "link": pl.Int32(),
    "pg": pl.String(),
    "seq": pl.Int64(),
    "op_type": pl.String(),
    "numel_in": pl.Int64(),
    "numel_out": pl.Int64(),
    "timeout_ms": pl.Int64(),
    "ran_for_ms": pl.Int64(),
    "last_enqueued": pl.Int64(),
    "last_completed": pl.Int64(),
    "exit_code": pl.Int32(),
    "signal": pl.Int32(),
    "pid": pl.Int64(),
    "iteration": pl.Int64(),
    "fields": pl.String(),
    "source": pl.String(),
    "uri": pl.String(),
    "line": pl.Int64(),
    "locator": pl.String(),
    "raw": pl.String(),
}
EVENTS_ARROW_SCHEMA = pl.DataFrame(schema=EVENT_SCHEMA).to_arrow().schema

#: an event's `raw` text is cut to this many characters
RAW_MAX = 4096

#: metrics CSV in long format, one row per sample
METRICS_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Datetime("us"), "node": pl.String, "metric": pl.String, "value": pl.Float64, "gpu": pl.String,
    "port": pl.String, "source": pl.String, "uri": pl.String, "line": pl.Int64,
}

#: one row per attempt: the static context as landed
CONTEXT_SCHEMA = pa.schema(
    [
        ("attempt_id", pa.string()), ("cluster", pa.string()), ("workload_id", pa.string()), ("attempt", pa.int64()),
        ("state", pa.string()), ("exit_code", pa.string()), ("start_ts", pa.timestamp("us")), ("end_ts", pa.timestamp("us")),
        ("timezone", pa.string()), ("gpu_model", pa.string()), ("gpus_per_node", pa.int32()),
        ("nodes", pa.list_(pa.string())), ("rank_map", pa.string()), ("spec_uri", pa.string()),
    ]
)

#: one row per source a connector read (or could not): lake and warehouse `connector_reports`
CONNECTOR_REPORT_SCHEMA = pa.schema(
    [
        ("attempt_id", pa.string()), ("connector", pa.string()), ("source", pa.string()), ("uri", pa.string()),
        ("status", pa.string()), ("rows", pa.int64()), ("reason", pa.string()), ("fingerprint", pa.string()),
        ("lines_malformed", pa.int64()), ("lines_binary", pa.int64()), ("lines_truncated", pa.int64()),
        ("lines_skipped", pa.int64()),
    ]
)

#: one row per PyTorch flight-recorder entry
FLIGHT_RECORDER_ENTRY_SCHEMA: dict[str, pl.DataType] = {
    "attempt_id": pl.String(), "rank": pl.Int32(), "pg_id": pl.String(), "pg_name": pl.String(), "pg_desc": pl.String(),
    "collective_seq_id": pl.Int64(), "p2p_seq_id": pl.Int64(), "is_p2p": pl.Boolean(), "op": pl.String(),
    "input_sizes": pl.String(), "output_sizes": pl.String(), "state": pl.String(), "time_created_ns": pl.Int64(),
    "time_discovered_started_ns": pl.Int64(), "time_discovered_completed_ns": pl.Int64(), "source": pl.String(),
    "uri": pl.String(), "entry": pl.Int64(), "locator": pl.String(),
}
FLIGHT_RECORDER_SOURCE = "flight_recorder"
FLIGHT_RECORDER_SCHEMA = pl.DataFrame(schema=FLIGHT_RECORDER_ENTRY_SCHEMA).to_arrow().schema
METRICS_ARROW_SCHEMA = pl.DataFrame(schema={"attempt_id": pl.String, **METRICS_SCHEMA}).to_arrow().schema


def lake_schemas() -> dict[str, pa.Schema]:
    """Each lake table's schema: what a reader gets for attempts whose partitions hold no file of the table (a table
    without rows gets no file, docs/DESIGN.md §2)."""
    return {"logs": LOGS_SCHEMA, "events": EVENTS_ARROW_SCHEMA, "progress": PROGRESS_SCHEMA, "metrics": METRICS_ARROW_SCHEMA,
            "context": CONTEXT_SCHEMA, "connector_reports": CONNECTOR_REPORT_SCHEMA, "flight_recorder": FLIGHT_RECORDER_SCHEMA}

# --- rules --------------------------------------------------------------------------------------------------------

#: what every rule selects
HIT_COLUMNS = (
    "attempt_id", "event_id", "rule_id", "role", "domain", "subdomain", "culprit_node", "culprit_rank", "gpu",
    "granularity", "strength", "ts", "summary", "action",
)
ROLES = ("root", "symptom", "confirmation", "ignored")

#: the `history` relation: verdicts of earlier attempts of the same workloads
HISTORY_COLUMNS = (
    "attempt_id VARCHAR, workload_id VARCHAR, cluster VARCHAR, attempt BIGINT, verdict VARCHAR, domain VARCHAR, "
    "subdomain VARCHAR, culprit_nodes VARCHAR[], progress BIGINT, start_ts TIMESTAMP"
)

# --- warehouse ----------------------------------------------------------------------------------------------------

#: the verdict object's keys, in order (docs/verdict.md)
VERDICT_KEYS = (
    "attempt_id", "workload_id", "attempt", "cluster", "state", "verdict", "domain", "subdomain", "root_cause",
    "culprit_nodes", "affected_nodes", "symptoms", "candidates", "why_not", "evidence", "quality", "connector_reports",
    "culprit_ranks", "granularity", "action", "rules_version", "schema_version",
)

#: tables keyed by attempt that a load replaces, in load order
ATTEMPT_TABLES = ("attributions", "attribution_evidence", "events", "progress", "connector_reports", "rule_hits")

RUN_COLUMNS = ("run_id", "flow", "started_at", "finished_at", "attempts", "rules_version", "lake_root", "run_date", "found",
               "skipped", "failed")

#: one row per attempt a nightly could not attribute (warehouse `run_failures`, without run_id and time)
RUN_FAILURE_SCHEMA = pa.schema([("attempt_id", pa.string()), ("spec_uri", pa.string()), ("stage", pa.string()), ("error", pa.string())])

# The causal chains the ranking reads (rules_sql/chains.yaml, docs/DESIGN.md §4.2): one row per chain, each side a
# class (domain, subdomain: null = any) and/or an event kind narrowed by codes or code texts (null = any); a row's
# condition (`when`: present, `unless`: absent; null: none) is a side of the same form.
_CHAIN_SIDE = [("domain", pa.string()), ("subdomain", pa.string()), ("kind", pa.string()), ("codes", pa.list_(pa.int64())),
               ("texts", pa.list_(pa.string()))]
CAUSAL_CHAINS_SCHEMA = pa.schema(
    [("id", pa.string())]
    + [(f"cause_{name}", t) for name, t in _CHAIN_SIDE]
    + [(f"effect_{name}", t) for name, t in _CHAIN_SIDE]
    + [("condition_present", pa.bool_())] + [(f"condition_{name}", t) for name, t in _CHAIN_SIDE]
    + [("scope", pa.string()), ("before_s", pa.float64()), ("after_s", pa.float64()), ("unstamped", pa.string()),
       ("relation", pa.string()), ("source", pa.string()), ("why", pa.string()), ("fixture", pa.string())]
)
# the classes whose job-level causes name the node that went silent first (subdomain null = any)
SILENT_NODE_CLASSES_SCHEMA = pa.schema([("domain", pa.string()), ("subdomain", pa.string())])



def run_failure(attempt_id: str | None, spec_uri: str, stage: str, error: str) -> dict:
    """A row of RUN_FAILURE_SCHEMA; `stage` is spec, discover, land, attribute or shard."""
    return {"attempt_id": attempt_id, "spec_uri": spec_uri, "stage": stage, "error": error}


def xid_catalog_path() -> Path:
    """The Xid catalog shipped with the package (warehouse `xid_catalog`; the rules read it too)."""
    return Path(str(resources.files("firstfault.warehouse") / "xid_catalog.csv"))


def xid_spread_path() -> Path:
    """The "application or GPU" Xids (the rules read it as xid_catalog.spread_subdomain): the hardware subdomain each
    takes when it follows one GPU across workloads, with where that test comes from."""
    return Path(str(resources.files("firstfault.warehouse") / "xid_spread.csv"))


#: the fleet aggregates `fleet rebuild` replaces
FLEET_TABLES = ("node_offenders", "port_hotspots", "gpu_model_trends", "incidents")


def conform_events(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Select/cast a frame into EVENT_SCHEMA (missing columns become null)."""
    names = lf.collect_schema().names()
    return lf.select([(pl.col(c) if c in names else pl.lit(None)).cast(t, strict=False).alias(c) for c, t in EVENT_SCHEMA.items()])
