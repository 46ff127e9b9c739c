"""What Kubernetes itself recorded about an attempt, as evidence: the Workload's admission and its eviction or end,
each container termination (OOMKilled, Error, exit code, signal) and each pod disruption, one line each, staged as
source `scheduler` from the context the Kueue connector built (`ctx.scheduler`, connectors/kueue.py). Nothing is
fetched: the lines are the scheduler state already in hand, put where the extraction patterns
(transforms/patterns/kubernetes.yaml) and the rules can read them and where evidence can point."""
from __future__ import annotations

from datetime import datetime, timezone

from firstfault.config import Config
from firstfault.connectors.base import Report, Staging
from firstfault.connectors.static_context import AttemptContext

SOURCE = "scheduler"


class KubernetesStatus:
    name = "kubernetes_status"

    def applies(self, ctx: AttemptContext) -> bool:
        return ctx.scheduler.get("name") == "kueue"

    def stage(self, ctx: AttemptContext, staging: Staging) -> list[Report]:
        reports = []
        for kind, ref, file_name, lines in _objects(ctx):
            origin = {"connector": self.name, "object": f"{kind}/{ref}"}
            with staging.open_log(self.name, file_name, source=SOURCE, origin=origin) as f:
                for at, text in sorted(lines):
                    f.write(f"{at} {text}\n".encode())
            uri = staging.logs[-1].path
            reports.append(Report(self.name, SOURCE, uri, "ok" if lines else "empty", len(lines),
                                  None if lines else f"{kind} {ref}: nothing recorded"))
        return reports


def _objects(ctx: AttemptContext) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """(kind, namespace/name, staged file name, [(RFC 3339 time, text)]) per object of the attempt."""
    scheduler = ctx.scheduler
    workload = scheduler.get("workload") or {}
    ref = scheduler.get("ref") or f"{workload.get('namespace')}/{workload.get('name')}"
    lines = []
    if workload.get("admitted_at"):
        queue = f" to ClusterQueue {workload['cluster_queue']}" if workload.get("cluster_queue") else ""
        lines.append((workload["admitted_at"], f"kubernetes: workload {ref} admitted{queue}"))
    ended_at = workload.get("ended_at") or _iso(ctx.end)
    if workload.get("end") and ended_at:
        path = f" ({workload['preemption']})" if workload.get("preemption") else ""
        message = f": {workload['message']}" if workload.get("message") else ""
        lines.append((ended_at, f"kubernetes: workload {ref} {workload['end']} reason={workload.get('reason') or 'unknown'}{path}{message}"))
    out = [("workload", ref, "workload.log", lines)]
    disruptions: dict[tuple[str, str], list[dict]] = {}
    for d in scheduler.get("pod_disruptions") or []:
        disruptions.setdefault((d["namespace"], d["name"]), []).append(d)
    for pod in scheduler.get("pods") or []:
        where = f"pod {pod['namespace']}/{pod['name']} on {pod['node']}"
        lines = []
        for t in pod.get("terminations") or []:
            if not t.get("finished_at"):
                continue  # still without an end time: nothing to place on the timeline
            signal = f" signal={t['signal']}" if t.get("signal") else ""
            lines.append((t["finished_at"], f"kubernetes: {where} container {t['container']} terminated "
                                            f"reason={t.get('reason') or 'unknown'} exit_code={t.get('exit_code')}{signal}"))
        for d in disruptions.get((pod["namespace"], pod["name"]), []):
            if d.get("at"):
                message = f": {d['message']}" if d.get("message") else ""
                lines.append((d["at"], f"kubernetes: {where} disrupted reason={d.get('reason') or 'unknown'}{message}"))
        # the node in the file name places the lines that no pattern reads (connectors/local_files.py)
        out.append(("pod", f"{pod['namespace']}/{pod['name']}", f"{pod['node']}.pod-{pod['namespace']}.{pod['name']}.log", lines))
    return out


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def from_config(config: Config) -> KubernetesStatus:
    return KubernetesStatus()
