"""`[actions]`: a verdict's `drain_node` recommendation turned into a drain (Slurm: `scontrol update ... State=DRAIN`)
or a cordon (Kubernetes: `spec.unschedulable`), within the operator's policy. Every decision, taken or not, is a row
of the warehouse's `actions` table (docs/automation.md).

`plan` decides (pure: the verdict, the policy and what firstfault already drained); `apply_actions` runs the plan
through the scheduler's `NodeControl` (connectors/node_control.py) and records it; `resume` returns a node to
service."""
from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from firstfault.config import ActionSettings, Config
from firstfault.connectors.node_control import CONTROLS, ActionError, NodeControl
from firstfault.errors import BadInput
from firstfault.warehouse.read import query, reading
from firstfault.warehouse.store import connect_writer

CONFIDENCE = ("low", "medium", "high")
MAX_REASON = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
ACTION_COLUMNS = ("action_id", "decided_at", "attempt_id", "cluster", "node", "rule", "kind", "status", "reason",
                  "command", "resumed_at")


@dataclass(frozen=True)
class Decision:
    attempt_id: str
    cluster: str
    node: str | None
    rule: str | None
    kind: str
    status: str        # done | dry_run | skipped | failed (a plan holds `planned` until it is run)
    reason: str        # why skipped (or failed); the drain reason otherwise
    command: str = ""


@dataclass(frozen=True)
class Drained:
    """What the policy counts: the nodes firstfault has taken out and not returned, and its drains of the last hour."""
    active: frozenset[tuple[str, str]]  # (cluster, node)
    last_hour: int


def drain_reason(verdict: dict) -> str:
    """`firstfault: <root summary> (<attempt>)`: one line without control characters, at most 200 characters (the
    summary is cut, never the attempt)."""
    summary = _CONTROL.sub(" ", (verdict.get("root_cause") or {}).get("summary") or verdict.get("subdomain") or "drain_node")
    summary = " ".join(summary.split())
    tail = f" ({_CONTROL.sub(' ', verdict['attempt_id'])})"
    room = MAX_REASON - len("firstfault: ") - len(tail)
    if len(summary) > room:
        summary = summary[:max(0, room - 1)] + "…"
    return (f"firstfault: {summary}{tail}")[:MAX_REASON]


def plan(verdict: dict, kind: str, settings: ActionSettings, drained: Drained, cluster_nodes: int) -> list[Decision]:
    """The decisions about one verdict: none unless it recommends `drain_node`; then one per culprit node, `planned`
    when every rule of the policy allows it, else `skipped` with the rule that did not."""
    if not settings.enabled or verdict.get("action") != "drain_node":
        return []
    cluster, attempt = verdict["cluster"], verdict["attempt_id"]
    rule = (verdict.get("root_cause") or {}).get("rule")
    reason = drain_reason(verdict)
    confidence = (verdict.get("quality") or {}).get("confidence") or "low"
    limit = math.ceil(settings.max_fraction * cluster_nodes)
    active = {node for c, node in drained.active if c == cluster}
    budget = settings.max_nodes_per_hour - drained.last_hour
    out = []
    for node in verdict.get("culprit_nodes") or [None]:
        why = None
        if verdict["verdict"] != "attributed":
            why = f"verdict {verdict['verdict']}"
        elif node is None:
            why = "no culprit node"
        elif CONFIDENCE.index(confidence) < CONFIDENCE.index(settings.min_confidence):
            why = f"confidence {confidence} below min_confidence {settings.min_confidence}"
        elif any(fnmatch.fnmatchcase(node, pattern) for pattern in settings.exclude):
            why = "exclude"
        elif node in active:
            why = "already drained by firstfault"
        elif budget <= 0:
            why = "max_nodes_per_hour"
        elif len(active) + 1 > limit:
            why = f"max_fraction ({len(active)} of {cluster_nodes} nodes drained, at most {limit})"
        if why:
            out.append(Decision(attempt, cluster, node, rule, kind, "skipped", why))
            continue
        active.add(node)
        budget -= 1
        out.append(Decision(attempt, cluster, node, rule, kind, "planned", reason))
    return out


def check_settings(settings: ActionSettings) -> None:
    if settings.min_confidence not in CONFIDENCE:
        raise BadInput("firstfault.toml", "actions.min_confidence", f"must be one of {', '.join(CONFIDENCE)}")
    if settings.max_nodes_per_hour < 0:
        raise BadInput("firstfault.toml", "actions.max_nodes_per_hour", "must be >= 0")
    if not 0 <= settings.max_fraction <= 1:
        raise BadInput("firstfault.toml", "actions.max_fraction", "must be between 0 and 1")


def apply_actions(config: Config, verdicts: Sequence[dict], scheduler: str) -> list[Decision]:
    """Plan and run the actions of verdicts found through the `scheduler` connector (`slurm` or `kueue`; any other
    name, such as a context posted to the API, gets none) and record every decision."""
    settings = config.actions
    check_settings(settings)
    if not settings.enabled or scheduler not in CONTROLS or not any(v.get("action") == "drain_node" for v in verdicts):
        return []
    control = CONTROLS[scheduler](config)
    decisions = []
    for verdict in verdicts:
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        drained = drained_nodes(config.warehouse.path, now, dry_run=settings.dry_run)
        count = _node_count(control)
        planned = plan(verdict, control.kind, settings, drained, count)
        made = [_run(d, control, settings.dry_run) for d in planned]
        record(config.warehouse.path, made, now)
        decisions += made
    return decisions


def _node_count(control: NodeControl) -> int:
    try:
        return control.node_count()
    except ActionError:
        return 0  # unknown: max_fraction allows nothing


def _run(decision: Decision, control: NodeControl, dry_run: bool) -> Decision:
    if decision.status != "planned":
        return decision
    command = control.command(decision.node, decision.reason)
    if dry_run:
        return Decision(**{**decision.__dict__, "status": "dry_run", "command": command})
    try:
        control.take_out(decision.node, decision.reason)
    except ActionError as e:
        return Decision(**{**decision.__dict__, "status": "failed", "reason": str(e), "command": command})
    return Decision(**{**decision.__dict__, "status": "done", "command": command})


# --- the actions table ---------------------------------------------------------------------------------------------

def drained_nodes(warehouse: str, now: datetime, *, dry_run: bool) -> Drained:
    """What the policy counts from the table: taken-out nodes not resumed, and drains since an hour ago. A dry run
    counts its own would-be drains, so it shows what the real policy would do."""
    status = "dry_run" if dry_run else "done"
    try:
        with reading(warehouse) as con:
            if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'actions'").fetchone()[0]:
                return Drained(frozenset(), 0)
            active = con.execute("SELECT DISTINCT cluster, node FROM actions WHERE status = ? AND resumed_at IS NULL", [status]).fetchall()
            hour = con.execute("SELECT count(*) FROM actions WHERE status = ? AND decided_at > ?", [status, now - timedelta(hours=1)]).fetchone()[0]
    except FileNotFoundError:
        return Drained(frozenset(), 0)
    return Drained(frozenset(active), hour)


def record(warehouse: str, decisions: Sequence[Decision], now: datetime) -> None:
    if not decisions:
        return
    con = connect_writer(warehouse)
    try:
        con.executemany("INSERT INTO actions (decided_at, attempt_id, cluster, node, rule, kind, status, reason, command) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [[now, d.attempt_id, d.cluster, d.node, d.rule, d.kind, d.status, d.reason, d.command] for d in decisions])
    finally:
        con.close()


def list_actions(warehouse: str) -> list[dict]:
    try:
        with reading(warehouse) as con:
            if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'actions'").fetchone()[0]:
                return []
            return query(con, f"SELECT {', '.join(ACTION_COLUMNS)} FROM actions ORDER BY action_id")
    except FileNotFoundError:
        return []


def resume(config: Config, action_id: int) -> dict:
    """Return the node of a `done` action to service and note when; BadInput for any other row."""
    rows = [r for r in list_actions(config.warehouse.path) if r["action_id"] == action_id]
    if not rows:
        raise BadInput("actions resume", "ID", f"no action {action_id} (firstfault actions lists them)")
    row = rows[0]
    if row["status"] != "done" or row["resumed_at"] is not None:
        state = "resumed already" if row["resumed_at"] is not None else f"{row['status']}: no node was taken out"
        raise BadInput("actions resume", "ID", f"action {action_id} is {state}")
    control = next(c(config) for c in CONTROLS.values() if c.kind == row["kind"])
    try:
        control.put_back(row["node"])
    except ActionError as e:
        raise BadInput("actions resume", "ID", f"node {row['node']}: {e}") from None
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    con = connect_writer(config.warehouse.path)
    try:
        con.execute("UPDATE actions SET resumed_at = ? WHERE action_id = ?", [now, action_id])
    finally:
        con.close()
    return {**row, "resumed_at": now}
