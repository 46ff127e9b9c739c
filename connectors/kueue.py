"""Kueue workloads as attempts: a Workload, its JobSet or Job, their Pods and the Nodes they ran on become one
AttemptContext per admission (docs/connectors.md).

The objects come either from the Kubernetes API (`[kubernetes] url`) or from a folder of captured
`kubectl get ... -o json` documents (`[kueue] documents`); both hand the same objects to the pure parsing below
(`parse_documents`, `workload_attempts`), so they give the same attempts.

How admissions are counted. A Workload keeps one condition per type, so one snapshot shows only the latest
admission (`Admitted`/`QuotaReserved` True), the latest eviction (`Evicted` True) and the end (`Finished` True).
When an evicted Workload is admitted again, Kueue flips `Evicted` (and `Preempted`) to False with the message
`Previously: <eviction message>`: the earlier admission is known to exist, its times are not. Every snapshot of the
Workload that is supplied (several captures in the folder) adds its admissions; an earlier admission known only
from a `Previously:` message, or from pods created before every recorded admission, takes its times from its
pods (first creation, last container termination). Within one admission, each JobSet restart (pod label
`jobset.sigs.k8s.io/restart-attempt`) is an attempt of its own: its pods are recreated from scratch.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from firstfault.connectors.http import ConnectorError, HttpClient, public_url
from firstfault.connectors.static_context import AttemptContext

from firstfault.config import Config, KubernetesSettings, KueueSettings
from firstfault.errors import BadInput

log = logging.getLogger(__name__)

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta1"
JOBSET_API = "/apis/jobset.x-k8s.io/v1alpha2"
BATCH_API = "/apis/batch/v1"
CORE_API = "/api/v1"

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
GLOBAL_INDEX_LABEL = "jobset.sigs.k8s.io/job-global-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
GPU_RESOURCE = "nvidia.com/gpu"
KINDS = ("Workload", "JobSet", "Job", "Pod", "Node")

# Why an admission ended (Workload `Evicted` reason) -> the attempt's state in Slurm vocabulary.
# PodsReadyTimeout is start-up trouble (image pulls, scheduling), a failure that needs the logs to explain it.
EVICTION_STATES = {
    "Preempted": "PREEMPTED", "MaximumExecutionTimeExceeded": "TIMEOUT", "PodsReadyTimeout": "FAILED",
    "Deactivated": "CANCELLED", "InactiveWorkload": "CANCELLED", "RequeuingLimitExceeded": "CANCELLED",
    "ClusterQueueStopped": "CANCELLED", "LocalQueueStopped": "CANCELLED",
}
# An eviction without a known reason sent the workload back to its queue: that is all that is known.
REQUEUED = "REQUEUED"
# Pods are created by the job controller right after admission; the Kueue controller and the API server stamp
# with different clocks, so a pod up to this much older than a recorded admission still belongs to it.
CLOCK_SLACK = timedelta(seconds=5)
PREVIOUSLY = "Previously: "


@dataclass(frozen=True)
class KubeObject:
    """One Kubernetes object and where it was read (a file or an API path), so bad fields can be named."""
    kind: str
    body: dict
    where: str
    prefix: str = ""  # the object's place inside its document (`items[3].`); "" for a document of its own

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.body["metadata"].get("namespace") or ""

    @property
    def labels(self) -> dict:
        return self.body["metadata"].get("labels") or {}

    def owners(self, kind: str) -> list[str]:
        return [o.get("name") for o in self.body["metadata"].get("ownerReferences") or []
                if isinstance(o, dict) and o.get("kind") == kind and o.get("name")]

    def mapping(self, path: str) -> dict:
        value: Any = self.body
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, "must be a mapping")
        return value

    def items(self, path: str) -> list:
        parent, _, key = path.rpartition(".")
        value = (self.mapping(parent) if parent else self.body).get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, "must be a list")
        return value

    def time(self, field_: str, value: Any) -> datetime | None:
        if value is None or value == "":
            return None
        try:
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            self.fail(field_, f"not an RFC 3339 timestamp: {value!r}")
        if parsed.tzinfo is None:
            self.fail(field_, f"timestamp without a zone: {value!r}")
        return parsed.astimezone(timezone.utc)

    def fail(self, field_: str, problem: str):
        raise BadInput(self.where, self.prefix + field_, problem)


def parse_documents(text: str, where: str) -> list[KubeObject]:
    """The Workloads, JobSets, Jobs, Pods and Nodes of one `kubectl get -o json` output: a single object, a `List`
    or typed list (`PodList`, whose items carry no `kind`), or several of them one after the other (`get -w`).
    Other kinds are skipped. BadInput names the file and the field."""
    decoder = json.JSONDecoder()
    documents, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            break
        try:
            document, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as e:
            raise BadInput(where, None, f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
        documents.append(document)
    if not documents:
        raise BadInput(where, None, "no JSON document")
    objects = []
    for d, document in enumerate(documents):
        objects.extend(document_objects(document, where, f"[{d}]." if len(documents) > 1 else ""))
    return objects


def document_objects(document: Any, where: str, prefix: str = "") -> list[KubeObject]:
    """The objects of one decoded document (an object or a List)."""
    if not isinstance(document, dict):
        raise BadInput(where, prefix.rstrip(".") or None, "must be a Kubernetes object or List")
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise BadInput(where, prefix + "kind", "required (a Kubernetes object or List)")
    if kind.endswith("List") and "items" in document:
        items = document["items"]
        if not isinstance(items, list):
            raise BadInput(where, prefix + "items", "must be a list")
        out = []
        for i, item in enumerate(items):
            here = f"{prefix}items[{i}]."
            if not isinstance(item, dict):
                raise BadInput(where, here.rstrip("."), "must be an object")
            item_kind = item.get("kind") or kind.removesuffix("List")
            if not item_kind:
                raise BadInput(where, here + "kind", "required in a plain List")
            out.extend(_checked(item_kind, item, where, here))
        return out
    return _checked(kind, document, where, prefix)


def _checked(kind: str, body: dict, where: str, prefix: str) -> list[KubeObject]:
    if kind not in KINDS:
        return []
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        raise BadInput(where, prefix + "metadata", "required")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise BadInput(where, prefix + "metadata.name", "required")
    if kind != "Node" and not isinstance(metadata.get("namespace"), str):
        raise BadInput(where, prefix + "metadata.namespace", "required")
    for key in ("labels", "annotations"):
        if metadata.get(key) is not None and not isinstance(metadata[key], dict):
            raise BadInput(where, f"{prefix}metadata.{key}", "must be a mapping")
    return [KubeObject(kind, body, where, prefix)]


def parse_ref(ref: str) -> tuple[str, str]:
    namespace, slash, name = (ref or "").strip().partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise BadInput("--kueue", "NAMESPACE/WORKLOAD", f"{ref!r} is not NAMESPACE/WORKLOAD")
    return namespace, name


def workload_id(namespace: str, name: str) -> str:
    """`NAMESPACE.WORKLOAD`: readable and unique (a namespace is a DNS label, it holds no dot) and free of `/`,
    which docs/DESIGN.md §1 keeps out of the workload part of attempt ids."""
    return f"{namespace}.{name}"


def related(objects: list[KubeObject], namespace: str, name: str) -> list[KubeObject]:
    """The snapshots of one Workload and the JobSet, Jobs, Pods and Nodes that belong to it."""
    workloads = [o for o in objects if o.kind == "Workload" and o.namespace == namespace and o.name == name]
    jobset_names = {n for w in workloads for n in w.owners("JobSet")}
    job_names = {n for w in workloads for n in w.owners("Job")}
    same_ns = [o for o in objects if o.namespace == namespace]
    jobsets = [o for o in same_ns if o.kind == "JobSet" and o.name in jobset_names]
    jobs = [o for o in same_ns if o.kind == "Job" and (
        o.name in job_names or o.labels.get(JOBSET_NAME_LABEL) in jobset_names or set(o.owners("JobSet")) & jobset_names)]
    job_names |= {j.name for j in jobs}
    pods = [o for o in same_ns if o.kind == "Pod" and (
        o.labels.get(JOBSET_NAME_LABEL) in jobset_names or set(o.owners("Job")) & job_names
        or any(o.labels.get(label) in job_names for label in JOB_NAME_LABELS))]
    node_names = {p.mapping("spec").get("nodeName") for p in pods}
    nodes = [o for o in objects if o.kind == "Node" and o.name in node_names]
    return workloads + jobsets + jobs + pods + nodes


# ------------------------------------------------------------------------------------------------ the timeline


@dataclass
class Admission:
    start: datetime | None  # None: known only from the pods it left behind
    cluster_queue: str | None = None
    end: datetime | None = None
    end_kind: str | None = None  # evicted | finished
    end_reason: str | None = None
    end_message: str | None = None
    preemption: str | None = None  # the `Preempted` condition's reason: which preemption path evicted it


@dataclass
class Pod:
    obj: KubeObject
    created: datetime
    node: str
    restart: int
    order: tuple
    record: dict  # the ctx.scheduler["pods"] entry
    gpus: int
    disruptions: list[dict] = field(default_factory=list)

    @property
    def terminations(self) -> list[dict]:
        return self.record["terminations"]


def _conditions(workload: KubeObject) -> dict[str, tuple[dict, datetime | None]]:
    out = {}
    for i, condition in enumerate(workload.items("status.conditions")):
        where = f"status.conditions[{i}]"
        if not isinstance(condition, dict) or not isinstance(condition.get("type"), str):
            workload.fail(f"{where}.type", "required")
        if condition.get("status") not in ("True", "False", "Unknown"):
            workload.fail(f"{where}.status", "must be True, False or Unknown")
        out[condition["type"]] = (condition, workload.time(f"{where}.lastTransitionTime", condition.get("lastTransitionTime")))
    return out


def admissions(snapshots: list[KubeObject]) -> list[Admission]:
    """Every admission the Workload snapshots show, oldest first (see the module docstring)."""
    starts: dict[datetime, str | None] = {}
    ends: dict[datetime, tuple] = {}
    earlier_evictions: list[tuple[datetime, str | None, str]] = []  # (re-admission time, reason, message)
    for workload in snapshots:
        conditions = _conditions(workload)
        admitted = conditions.get("Admitted") or conditions.get("QuotaReserved")
        if admitted and admitted[0]["status"] == "True" and admitted[1]:
            starts[admitted[1]] = workload.mapping("status.admission").get("clusterQueue")
        evicted, preempted, finished = conditions.get("Evicted"), conditions.get("Preempted"), conditions.get("Finished")
        if evicted and evicted[1] and evicted[0]["status"] == "True":
            path = preempted[0].get("reason") if preempted and preempted[0]["status"] == "True" else None
            ends[evicted[1]] = ("evicted", evicted[0].get("reason"), evicted[0].get("message"), path)
        elif evicted and evicted[1] and str(evicted[0].get("message") or "").startswith(PREVIOUSLY):
            # the Preempted condition is only ever set by a preemption: reset together with Evicted, it names the reason
            was_preempted = bool(preempted and preempted[1] and abs(preempted[1] - evicted[1]) <= CLOCK_SLACK
                                 and str(preempted[0].get("message") or "").startswith(PREVIOUSLY))
            earlier_evictions.append((evicted[1], "Preempted" if was_preempted else None,
                                      evicted[0]["message"].removeprefix(PREVIOUSLY)))
        if finished and finished[1] and finished[0]["status"] == "True":
            ends[finished[1]] = ("finished", finished[0].get("reason"), finished[0].get("message"), None)
    # in time order, an end closes the admission that is open; an end with none open closes one no snapshot recorded
    marks = sorted([(t, 1, ("start", queue)) for t, queue in starts.items()] + [(t, 0, ("end", e)) for t, e in ends.items()],
                   key=lambda m: (m[0], m[1]))
    timeline: list[Admission] = []
    for t, _, (what, payload) in marks:
        if what == "start":
            timeline.append(Admission(t, payload))
            continue
        if not timeline or timeline[-1].end_kind is not None:
            timeline.append(Admission(None))
        timeline[-1].end = t
        timeline[-1].end_kind, timeline[-1].end_reason, timeline[-1].end_message, timeline[-1].preemption = payload
    for readmitted, reason, message in earlier_evictions:
        # the re-admission that reset the condition (Admitted can follow QuotaReserved when admission checks run)
        k = next((i for i, a in enumerate(timeline) if a.start is not None and a.start >= readmitted - CLOCK_SLACK), None)
        if k is None:
            continue
        if k == 0:
            timeline.insert(0, Admission(None, end_kind="evicted", end_reason=reason, end_message=message))
        elif timeline[k - 1].end_kind is None:  # the admission it ended is recorded, its eviction was not
            timeline[k - 1].end_kind, timeline[k - 1].end_reason, timeline[k - 1].end_message = "evicted", reason, message
    return timeline


def _pod(obj: KubeObject) -> Pod | None:
    spec, status = obj.mapping("spec"), obj.mapping("status")
    node = spec.get("nodeName")
    if not node:
        return None  # never scheduled: no node, no logs
    created = obj.time("metadata.creationTimestamp", obj.body["metadata"].get("creationTimestamp"))
    if created is None:
        obj.fail("metadata.creationTimestamp", "required")
    containers, gpus = [], 0
    for i, container in enumerate(obj.items("spec.containers")):
        if not isinstance(container, dict) or not container.get("name"):
            obj.fail(f"spec.containers[{i}].name", "required")
        containers.append(container["name"])
        resources = container.get("resources") or {}
        quantity = (resources.get("limits") or {}).get(GPU_RESOURCE, (resources.get("requests") or {}).get(GPU_RESOURCE))
        if quantity is not None:
            try:
                gpus += int(str(quantity))
            except ValueError:
                obj.fail(f"spec.containers[{i}].resources.limits.{GPU_RESOURCE}", f"not a whole number: {quantity!r}")
    restarts, terminations = {}, []
    for i, state in enumerate(obj.items("status.containerStatuses")):
        if not isinstance(state, dict) or not state.get("name"):
            obj.fail(f"status.containerStatuses[{i}].name", "required")
        restarts[state["name"]] = int(state.get("restartCount") or 0)
        for which in ("lastState", "state"):
            ended = (state.get(which) or {}).get("terminated")
            if ended:
                terminations.append(_termination(obj, f"status.containerStatuses[{i}].{which}.terminated", state["name"], ended))
    terminations.sort(key=lambda t: (t["finished_at"] or "", t["container"]))
    disruptions = []
    for i, condition in enumerate(status.get("conditions") or []):
        if isinstance(condition, dict) and condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            at = obj.time(f"status.conditions[{i}].lastTransitionTime", condition.get("lastTransitionTime"))
            disruptions.append({"namespace": obj.namespace, "name": obj.name, "node": node, "reason": condition.get("reason"),
                                "message": condition.get("message"), "at": _iso(at)})
    labels = obj.labels
    record = {"namespace": obj.namespace, "name": obj.name, "node": node, "containers": containers,
              "restarts": restarts, "terminations": terminations}
    order = (_int(labels.get(GLOBAL_INDEX_LABEL)), _int(labels.get(COMPLETION_INDEX_LABEL)), obj.name)
    return Pod(obj, created, node, _int(labels.get(RESTART_LABEL)), order, record, gpus, disruptions)


def _termination(obj: KubeObject, where: str, container: str, ended: dict) -> dict:
    if not isinstance(ended, dict):
        obj.fail(where, "must be a mapping")
    exit_code = ended.get("exitCode")
    if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
        obj.fail(f"{where}.exitCode", "must be an integer")
    signal = ended.get("signal") or (exit_code - 128 if exit_code and 128 < exit_code < 160 else None)
    return {"container": container, "reason": ended.get("reason"), "exit_code": exit_code, "signal": signal,
            "started_at": _iso(obj.time(f"{where}.startedAt", ended.get("startedAt"))),
            "finished_at": _iso(obj.time(f"{where}.finishedAt", ended.get("finishedAt")))}


def workload_attempts(objects: list[KubeObject], namespace: str, name: str, *, cluster: str,
                      gpu_label: str) -> list[AttemptContext]:
    """The attempts of one Workload from its related objects (`related`); [] when the Workload is not among them."""
    snapshots = [o for o in objects if o.kind == "Workload" and o.namespace == namespace and o.name == name]
    if not snapshots:
        return []
    timeline = admissions(snapshots)
    latest: dict[tuple[str, str], KubeObject] = {}
    for o in objects:  # a pod captured more than once: its latest version (the highest resourceVersion) wins
        if o.kind == "Pod" and _int(o.body["metadata"].get("resourceVersion")) >= _int(
                latest.get((o.namespace, o.name), o).body["metadata"].get("resourceVersion")):
            latest[(o.namespace, o.name)] = o
    pods = sorted(filter(None, map(_pod, latest.values())), key=lambda p: (p.created, p.order))
    first_known = next((a.start for a in timeline if a.start is not None), None)
    unrecorded = pods and (first_known is None or pods[0].created < first_known - CLOCK_SLACK)
    if unrecorded and (not timeline or timeline[0].start is not None):
        # pods exist only after an admission: these prove one that no captured snapshot recorded
        timeline.insert(0, Admission(None))
    # a pod belongs to the last admission that began before it was created; one whose start was not recorded began
    # after the previous admission ended
    begun = [a.start - CLOCK_SLACK if a.start else (timeline[i - 1].end if i else None) for i, a in enumerate(timeline)]
    groups: dict[tuple[int, int], list[Pod]] = {}
    for pod in pods:
        index = max((i for i, b in enumerate(begun) if b is None or b <= pod.created), default=0)
        groups.setdefault((index, pod.restart), []).append(pod)
    nodes_by_name = {o.name: o for o in objects if o.kind == "Node"}
    jobs = [o for o in objects if o.kind == "Job"]
    ref = f"{namespace}/{name}"
    out, number = [], 0
    for index, admission in enumerate(timeline):
        restarts = sorted(r for i, r in groups if i == index)
        if not restarts:
            log.warning("kueue: %s admission %d has no scheduled pod; it is counted but has no nodes to attribute", ref, index)
            number += 1
            continue
        for position, restart in enumerate(restarts):
            group = sorted(groups[(index, restart)], key=lambda p: p.order)
            last = position == len(restarts) - 1
            start = admission.start if position == 0 and admission.start else min(p.created for p in group)
            finished = [datetime.fromisoformat(t["finished_at"]) for p in group for t in p.terminations if t["finished_at"]]
            still_running = last and index == len(timeline) - 1 and admission.end_kind is None
            if last and admission.end:
                end = admission.end
            elif still_running:
                end = None  # containers that restarted in place have ended; the attempt has not
            elif finished:
                end = max(finished)
            elif not last:
                end = min(p.created for p in groups[(index, restarts[position + 1])])
            else:
                end = None
            state = _state(admission, last, index == len(timeline) - 1, group, jobs)
            out.append(_context(ref, namespace, name, number, cluster, start, end if end is None else max(end, start), state,
                                admission.start if position == 0 else None, admission if last else None, group,
                                nodes_by_name, gpu_label))
            number += 1
    return out


def _state(admission: Admission, last_of_admission: bool, last_admission: bool, group: list[Pod], jobs: list[KubeObject]) -> str:
    if not last_of_admission:
        state = "FAILED"  # the JobSet restarted: a job of this generation failed
    elif admission.end_kind == "evicted":
        state = EVICTION_STATES.get(admission.end_reason or "", REQUEUED)
    elif admission.end_kind == "finished":
        state = "COMPLETED" if admission.end_reason == "Succeeded" else "FAILED"
        if state == "FAILED" and last_admission and any(
                c.get("type") == "Failed" and c.get("status") == "True" and c.get("reason") == "DeadlineExceeded"
                for j in jobs for c in j.items("status.conditions") if isinstance(c, dict)):
            state = "TIMEOUT"
    else:
        state = "RUNNING" if last_admission else REQUEUED
    if state == "FAILED" and any(t["reason"] == "OOMKilled" for p in group for t in p.terminations):
        state = "OUT_OF_MEMORY"
    return state


def _context(ref, namespace, name, number, cluster, start, end, state, admitted_at, ended, group, nodes_by_name,
             gpu_label) -> AttemptContext:
    """`admitted_at`: the admission this attempt began with (None for a JobSet restart inside it); `ended`: the
    admission whose end is this attempt's end (None when a JobSet restart followed it)."""
    nodes = list(dict.fromkeys(p.node for p in group))
    gpus_by_node = Counter()
    for p in group:
        gpus_by_node[p.node] += p.gpus
    failures = sorted((t["finished_at"] or "", t["exit_code"]) for p in group for t in p.terminations if t["exit_code"])
    workload = {"namespace": namespace, "name": name, "admitted_at": _iso(admitted_at)}
    if ended is not None:
        workload.update({"cluster_queue": ended.cluster_queue, "ended_at": _iso(ended.end), "end": ended.end_kind,
                         "reason": ended.end_reason, "message": ended.end_message, "preemption": ended.preemption})
    scheduler = {"name": "kueue", "ref": ref, "pods": [p.record for p in group],
                 "workload": {k: v for k, v in workload.items() if v is not None},
                 "pod_disruptions": [d for p in group for d in p.disruptions]}
    return AttemptContext(
        workload_id=workload_id(namespace, name), attempt=number, cluster=cluster, start=start, end=end,
        nodes=tuple(nodes), state=state, exit_code=str(failures[0][1]) if failures else None,
        gpu_model=_gpu_model(nodes, group, nodes_by_name, gpu_label),
        gpus_per_node=max(gpus_by_node.values()) or AttemptContext.gpus_per_node,  # no GPU asked for: the default
        scheduler=scheduler,
    )


def _gpu_model(nodes: list[str], group: list[Pod], nodes_by_name: dict[str, KubeObject], gpu_label: str) -> str | None:
    """The Node label (most common over the attempt's nodes), else what the pods asked for by node selector or
    required affinity (a single value), else unknown."""
    labelled = Counter(nodes_by_name[n].labels[gpu_label] for n in nodes if n in nodes_by_name and nodes_by_name[n].labels.get(gpu_label))
    if labelled:
        return sorted(labelled.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    for pod in group:
        spec = pod.obj.mapping("spec")
        selected = (spec.get("nodeSelector") or {}).get(gpu_label)
        if selected:
            return str(selected)
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        for term in required.get("nodeSelectorTerms") or []:
            for expression in (term or {}).get("matchExpressions") or []:
                if expression.get("key") == gpu_label and expression.get("operator") == "In" and len(expression.get("values") or []) == 1:
                    return str(expression["values"][0])
    return None


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _last_transition(workload: KubeObject) -> datetime | None:
    times = [t for _, t in _conditions(workload).values() if t is not None]
    return max(times, default=None)


# ------------------------------------------------------------------------------------------------ the two ways in


class DocumentFolder:
    """Captured `kubectl get ... -o json` output: every `*.json` under the folder, read once."""

    def __init__(self, folder: str):
        self.folder = folder

    @cached_property
    def objects(self) -> list[KubeObject]:
        """Read on first use, so a run that never asks Kueue does not read (or trip over) the folder."""
        root = Path(self.folder).expanduser()
        if not root.is_dir():
            raise BadInput(self.folder, "kueue.documents", "no such directory")
        objects = []
        for path in sorted(root.rglob("*.json")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise BadInput(str(path), None, f"cannot read: {e}") from None
            objects.extend(parse_documents(text, str(path)))
        return objects

    def workload_objects(self, namespace: str, name: str) -> list[KubeObject]:
        return related(self.objects, namespace, name)

    def workloads(self, namespaces: tuple[str, ...]) -> list[KubeObject]:
        return [o for o in self.objects if o.kind == "Workload" and (not namespaces or o.namespace in namespaces)]

    def describe(self) -> str:
        return self.folder


class KubernetesApi:
    """The same objects read from the API server through the shared HTTP client."""

    PAGE = 500

    def __init__(self, settings: KubernetesSettings):
        self.settings = settings

    def _client(self):
        try:
            return HttpClient(self.settings, "kueue")
        except ConnectorError as e:  # an unreadable token_file, CA bundle or client certificate
            raise BadInput("firstfault.toml", "kubernetes", e.reason) from None

    def _get(self, http, path: str, params: dict | None = None) -> list[KubeObject]:
        """One object or every page of a list; [] when the server says 404. A server that cannot be reached is a
        problem of the `[kubernetes] url` setting."""
        out, params = [], dict(params or {})
        while True:
            try:
                document = http.get_json(path, params)
            except ConnectorError as e:
                if e.status == 404:
                    return out
                raise BadInput(public_url(self.settings.url), "kubernetes.url", e.reason) from None
            out.extend(document_objects(document, path))
            token = (document.get("metadata") or {}).get("continue")
            if not token:
                return out
            params["continue"] = token

    def _list(self, http, path: str, selector: str | None = None) -> list[KubeObject]:
        return self._get(http, path, {"limit": self.PAGE, **({"labelSelector": selector} if selector else {})})

    def workload_objects(self, namespace: str, name: str) -> list[KubeObject]:
        with self._client() as http:
            workloads = self._get(http, f"{KUEUE_API}/namespaces/{namespace}/workloads/{name}")
            objects = list(workloads)
            for owner in sorted({n for w in workloads for n in w.owners("JobSet")}):
                objects += self._get(http, f"{JOBSET_API}/namespaces/{namespace}/jobsets/{owner}")
                objects += self._list(http, f"{BATCH_API}/namespaces/{namespace}/jobs", f"{JOBSET_NAME_LABEL}={owner}")
                objects += self._list(http, f"{CORE_API}/namespaces/{namespace}/pods", f"{JOBSET_NAME_LABEL}={owner}")
            for owner in sorted({n for w in workloads for n in w.owners("Job")}):
                objects += self._get(http, f"{BATCH_API}/namespaces/{namespace}/jobs/{owner}")
                objects += self._list(http, f"{CORE_API}/namespaces/{namespace}/pods", f"{JOB_NAME_LABELS[0]}={owner}")
            for node in sorted({o.mapping("spec").get("nodeName") for o in objects if o.kind == "Pod"} - {None, ""}):
                objects += self._get(http, f"{CORE_API}/nodes/{node}")
        return related(objects, namespace, name)

    def workloads(self, namespaces: tuple[str, ...]) -> list[KubeObject]:
        with self._client() as http:
            if not namespaces:
                return self._list(http, f"{KUEUE_API}/workloads")
            return [w for ns in namespaces for w in self._list(http, f"{KUEUE_API}/namespaces/{ns}/workloads")]

    def describe(self) -> str:
        return public_url(self.settings.url)


class KueueConnector:
    name = "kueue"

    def __init__(self, settings: KueueSettings, source: DocumentFolder | KubernetesApi, gpu_label: str):
        self.settings = settings
        self.source = source
        self.gpu_label = gpu_label

    def resolve(self, ref: str) -> list[AttemptContext]:
        namespace, name = parse_ref(ref)
        objects = self.source.workload_objects(namespace, name)
        if not any(o.kind == "Workload" for o in objects):
            raise BadInput("--kueue", "NAMESPACE/WORKLOAD", f"no Workload {namespace}/{name} in {self.source.describe()}")
        return workload_attempts(objects, namespace, name, cluster=self.settings.cluster, gpu_label=self.gpu_label)

    def discover(self, start: datetime, end: datetime) -> list[AttemptContext]:
        out = []
        refs = sorted({(w.namespace, w.name) for w in self.source.workloads(self.settings.namespaces)
                       if (_last_transition(w) or start) >= start})  # untouched since before the window: nothing ended in it
        for namespace, name in refs:
            objects = self.source.workload_objects(namespace, name)
            out += [c for c in workload_attempts(objects, namespace, name, cluster=self.settings.cluster, gpu_label=self.gpu_label)
                    if c.end is not None and start <= c.end < end]
        return out


def from_config(config: Config) -> KueueConnector | None:
    if config.kueue.documents:
        return KueueConnector(config.kueue, DocumentFolder(config.kueue.documents), config.kubernetes.gpu_label)
    if config.kubernetes.url:
        return KueueConnector(config.kueue, KubernetesApi(config.kubernetes), config.kubernetes.gpu_label)
    return None
