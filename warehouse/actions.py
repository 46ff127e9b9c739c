"""`[actions]`: a verdict's `drain_node` recommendation turned into a drain (Slurm: `scontrol update ... State=DRAIN`)
or a cordon (Kubernetes: `spec.unschedulable`), within the operator's policy. Every decision, taken or not, is a row
of the warehouse's `actions` table (docs/automation.md).

`plan` decides (pure: the verdict, the policy, the attempt's nodes and what firstfault already drained);
`apply_actions` runs the plan through the scheduler's `NodeControl` (connectors/node_control.py) and records it;
`resume` returns a node to service.

A culprit node is acted on only when the scheduler (or the Kubernetes API) listed it among the attempt's nodes: a
host name a log line holds is the job's claim (a job can print any line), and a claim is `refused`, never a target.

Deciding, calling and recording hold the warehouse's actions lock (warehouse/actions_lock.py), so two processes
count one budget. A drain is written ahead: its row is `planned` before the call and marked `done` or `failed`
after it; a `planned` row found under the lock was left by a process that ended in between, and is finished then
(`finish_planned`)."""
from __future__ import annotations

import fnmatch
import logging
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from firstfault.config import ActionSettings, Config
from firstfault.connectors.node_control import CONTROLS, ActionError, NodeControl
from firstfault.errors import BadInput
from firstfault.warehouse.actions_lock import actions_lock
from firstfault.warehouse.read import query, reading
from firstfault.warehouse.store import connect_writer

log = logging.getLogger(__name__)

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
    status: str        # done | dry_run | skipped | refused | failed; `planned` from the plan until its call ends
    reason: str        # why skipped, refused (or failed); the drain reason otherwise
    command: str = ""
    action_id: int | None = None  # its row, once recorded


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


def refusal(node: str, control: NodeControl, members: Collection[str]) -> str | None:
    """Why a culprit cannot be a target: a name that is not exactly one node to the scheduler (`ALL`, a hostlist, a
    path), or one the scheduler did not list for the attempt (`members`). None for a node of the attempt."""
    if problem := control.name_problem(node):
        return f"{problem}: a claim of the log, not a node of the attempt"
    if node not in members:
        return f"not among the attempt's {len(members)} node(s) from the scheduler: a claim of the log"
    return None


def plan(verdict: dict, control: NodeControl, settings: ActionSettings, drained: Drained, cluster_nodes: int,
         members: Collection[str]) -> list[Decision]:
    """The decisions about one verdict: none unless it recommends `drain_node`; then one per culprit node, `refused`
    unless it is one of the attempt's nodes (`members`, as the scheduler listed them), `planned` when every rule of
    the policy allows it, else `skipped` with the rule that did not."""
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
        elif refused := refusal(node, control, members):
            out.append(Decision(attempt, cluster, node, rule, control.kind, "refused", refused))
            continue
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
            out.append(Decision(attempt, cluster, node, rule, control.kind, "skipped", why))
            continue
        active.add(node)
        budget -= 1
        out.append(Decision(attempt, cluster, node, rule, control.kind, "planned", reason))
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
    warehouse = config.warehouse.path
    decisions = []
    with actions_lock(warehouse):
        finish_planned(warehouse, control)
        members = attempt_nodes(warehouse, [v["attempt_id"] for v in verdicts])
        for verdict in verdicts:
            now = datetime.now(timezone.utc).replace(tzinfo=None)
            drained = drained_nodes(warehouse, now, dry_run=settings.dry_run)
            count = _node_count(control)
            planned = plan(verdict, control, settings, drained, count, members.get(verdict["attempt_id"], frozenset()))
            decisions += _carry_out(warehouse, planned, control, settings.dry_run, now)
    return decisions


def finish_planned(warehouse: str, control: NodeControl) -> None:
    """Finish the `planned` rows of `control`'s kind, left by a process that ended between writing one and marking
    it (run under the actions lock: no live process is between the two). The node is out with the row's reason: the
    call was made, the row is `done`; it is not: the call is made now. A scheduler that does not answer leaves the
    row `planned` (counted as taken out) for the next run."""
    for row in _rows(warehouse, "WHERE status = 'planned' AND kind = ? ORDER BY action_id", [control.kind]):
        decision = Decision(**{k: row[k] for k in Decision.__dataclass_fields__})
        try:
            out = control.is_out(decision.node, decision.reason)
        except ActionError as e:
            log.warning("action %s (%s %s) stays planned: %s", decision.action_id, decision.kind, decision.node, e)
            continue
        if out:
            mark(warehouse, replace(decision, status="done"))
        else:
            _call(warehouse, decision, control)


def _node_count(control: NodeControl) -> int:
    try:
        return control.node_count()
    except ActionError:
        return 0  # unknown: max_fraction allows nothing


def _carry_out(warehouse: str, decisions: list[Decision], control: NodeControl, dry_run: bool, now: datetime) -> list[Decision]:
    """Record the decisions, a planned one with its command, before any call (a dry run's as `dry_run`, never
    called); then make each planned call and mark its row."""
    ahead = [replace(d, status="dry_run" if dry_run else d.status, command=control.command(d.node, d.reason))
             if d.status == "planned" else d for d in decisions]
    return [_call(warehouse, d, control) if d.status == "planned" else d for d in record(warehouse, ahead, now)]


def _call(warehouse: str, decision: Decision, control: NodeControl) -> Decision:
    try:
        control.take_out(decision.node, decision.reason)
    except ActionError as e:
        return mark(warehouse, replace(decision, status="failed", reason=str(e)))
    return mark(warehouse, replace(decision, status="done"))


# --- the actions table ---------------------------------------------------------------------------------------------

def drained_nodes(warehouse: str, now: datetime, *, dry_run: bool) -> Drained:
    """What the policy counts from the table: taken-out nodes not resumed, and drains since an hour ago. A dry run
    counts its own would-be drains, so it shows what the real policy would do; a real run counts `planned` rows too
    (their call may have been made)."""
    statuses = ["dry_run"] if dry_run else ["done", "planned"]
    active = _rows(warehouse, "WHERE list_contains(?, status) AND resumed_at IS NULL", [statuses])
    hour = _rows(warehouse, "WHERE list_contains(?, status) AND decided_at > ?", [statuses, now - timedelta(hours=1)])
    return Drained(frozenset((r["cluster"], r["node"]) for r in active), len(hour))


def attempt_nodes(warehouse: str, attempt_ids: Sequence[str]) -> dict[str, frozenset[str]]:
    """The attempts' nodes as their scheduler connector listed them (the context's `nodes`, kept by the load)."""
    try:
        with reading(warehouse) as con:
            rows = con.execute("SELECT attempt_id, nodes FROM attributions WHERE attempt_id IN (SELECT unnest(?))",
                               [list(attempt_ids)]).fetchall()
    except FileNotFoundError:
        return {}
    return {attempt: frozenset(nodes or ()) for attempt, nodes in rows}


def record(warehouse: str, decisions: Sequence[Decision], now: datetime) -> list[Decision]:
    """Insert a row per decision; the decisions with their action ids."""
    if not decisions:
        return []
    con = connect_writer(warehouse)
    try:
        return [replace(d, action_id=con.execute(
            "INSERT INTO actions (decided_at, attempt_id, cluster, node, rule, kind, status, reason, command) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING action_id",
            [now, d.attempt_id, d.cluster, d.node, d.rule, d.kind, d.status, d.reason, d.command]).fetchone()[0])
            for d in decisions]
    finally:
        con.close()


def mark(warehouse: str, decision: Decision) -> Decision:
    """Write a planned row's outcome (its status, and the error of a failed call)."""
    con = connect_writer(warehouse)
    try:
        con.execute("UPDATE actions SET status = ?, reason = ? WHERE action_id = ?",
                    [decision.status, decision.reason, decision.action_id])
    finally:
        con.close()
    return decision


def list_actions(warehouse: str) -> list[dict]:
    return _rows(warehouse, "ORDER BY action_id")


def _rows(warehouse: str, where: str, params: list | None = None) -> list[dict]:
    """The actions rows selected by `where` (none while there is no warehouse or no table)."""
    try:
        with reading(warehouse) as con:
            if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'actions'").fetchone()[0]:
                return []
            return query(con, f"SELECT {', '.join(ACTION_COLUMNS)} FROM actions {where}", params)
    except FileNotFoundError:
        return []


def resume(config: Config, action_id: int) -> dict:
    """Return the node of a `done` action to service and note when; BadInput for any other row."""
    rows = [r for r in list_actions(config.warehouse.path) if r["action_id"] == action_id]
    if not rows:
        raise BadInput("actions resume", "ID", f"no action {action_id} (firstfault actions lists them)")
    row = rows[0]
    if row["status"] != "done" or row["resumed_at"] is not None:
        state = ("resumed already" if row["resumed_at"] is not None
                 else "planned: its call has not finished (the next action run finishes it)" if row["status"] == "planned"
                 else f"{row['status']}: no node was taken out")
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
