"""Kubernetes pod logs: the containers' output of an attempt's pods, fetched from the API server and staged.

A scheduler connector (Kueue) puts the attempt's pods in the context, as `scheduler["pods"]`:

    [{"namespace": "train", "name": "llama-workers-0-0", "node": "node-01",
      "containers": ["trainer"], "restarts": {"trainer": 1}}, ...]

For each pod and container, `GET /api/v1/namespaces/{ns}/pods/{pod}/log?container=C&timestamps=true` is streamed
to a staged file (source `applog`); a container that restarted also gets its previous instance (`previous=true`),
whose log holds the failure that caused the restart. With `timestamps=true` every line starts with the kubelet's
RFC 3339 nanosecond stamp, the format staged files use. The file name carries the pod's node, which is how the
landing path places its lines. A pod that is gone (404) is reported `missing`.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import quote

from firstfault.config import Config, KubernetesSettings
from firstfault.connectors.base import Report, Staging
from firstfault.connectors.http import ConnectorError, HttpClient, public_url
from firstfault.connectors.static_context import AttemptContext

log = logging.getLogger(__name__)

SOURCE = "applog"


@dataclass(frozen=True)
class PodContainer:
    namespace: str
    pod: str
    node: str
    container: str
    previous: bool  # the instance before the last restart

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{quote(self.namespace, safe='')}/pods/{quote(self.pod, safe='')}/log"

    @property
    def params(self) -> dict[str, str]:
        return {"container": self.container, "timestamps": "true", **({"previous": "true"} if self.previous else {})}

    @property
    def staged_name(self) -> str:
        # the basename is the node alone: the landing path reads the node from it, and pod or container names
        # could otherwise be mistaken for a node or a rank
        folder = "/".join(_path_safe(p) for p in (self.namespace, self.pod, self.container))
        return f"{folder}/{_path_safe(self.node)}{'.previous' if self.previous else ''}.log"


@dataclass(frozen=True)
class KubernetesLogsConnector:
    settings: KubernetesSettings
    name: ClassVar[str] = "kubernetes_logs"

    def applies(self, ctx: AttemptContext) -> bool:
        pods = ctx.scheduler.get("pods")
        return isinstance(pods, list) and bool(pods)

    def stage(self, ctx: AttemptContext, staging: Staging) -> list[Report]:
        base = public_url(self.settings.url.rstrip("/"))
        targets, reports = pod_containers(ctx.scheduler["pods"], self.name, base)
        try:
            client = HttpClient(self.settings, self.name)
        except ConnectorError as e:
            return reports + [Report(self.name, SOURCE, _uri(base, t), "error", 0, e.reason) for t in targets]
        with client:
            reports += [self._fetch(client, staging, base, t) for t in targets]
        return reports

    def _fetch(self, client: HttpClient, staging: Staging, base: str, target: PodContainer) -> Report:
        uri = _uri(base, target)
        lines = 0
        try:
            with client.stream(target.path, target.params) as response:
                origin = {"connector": self.name, "url": base, "namespace": target.namespace, "pod": target.pod,
                          "container": target.container, "previous": target.previous}
                with staging.open_log(self.name, target.staged_name, source=SOURCE, origin=origin) as f:
                    last = b"\n"
                    for chunk in response.iter_bytes():
                        f.write(chunk)
                        lines += chunk.count(b"\n")
                        last = chunk[-1:] or last
                    lines += last != b"\n"  # a last line without its newline
        except ConnectorError as e:
            if e.status == 404:
                return Report(self.name, SOURCE, uri, "missing", 0, f"pod or container not found (HTTP 404): {e.reason}")
            return Report(self.name, SOURCE, uri, "error", lines, e.reason)
        except OSError as e:
            return Report(self.name, SOURCE, uri, "error", lines, f"staging: {type(e).__name__}: {e}")
        log.info("kubernetes_logs: %s/%s %s%s: %d lines", target.namespace, target.pod, target.container,
                 " (previous)" if target.previous else "", lines)
        return Report(self.name, SOURCE, uri, "ok" if lines else "empty", lines, None if lines else "no lines")


def pod_containers(pods: list[Any], connector: str, base: str) -> tuple[list[PodContainer], list[Report]]:
    """The logs to fetch (each container, and its previous instance when it restarted), and an error report for
    each malformed pod entry."""
    targets, reports = [], []
    for i, pod in enumerate(pods):
        problem = _pod_problem(pod)
        if problem:
            reports.append(Report(connector, SOURCE, base, "error", 0, f"scheduler.pods[{i}]: {problem}"))
            continue
        for container in pod["containers"]:
            targets.append(PodContainer(pod["namespace"], pod["name"], pod["node"], container, False))
            if (pod.get("restarts") or {}).get(container, 0) > 0:
                targets.append(PodContainer(pod["namespace"], pod["name"], pod["node"], container, True))
    return targets, reports


def _pod_problem(pod: Any) -> str | None:
    if not isinstance(pod, dict):
        return "must be a mapping"
    for key in ("namespace", "name", "node"):
        if not isinstance(pod.get(key), str) or not pod[key]:
            return f"{key} must be a non-empty string"
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers or not all(isinstance(c, str) and c for c in containers):
        return "containers must be a non-empty list of names"
    restarts = pod.get("restarts") or {}
    if not isinstance(restarts, dict) or not all(isinstance(n, int) and not isinstance(n, bool) for n in restarts.values()):
        return "restarts must map container names to counts"
    return None


def _uri(base: str, target: PodContainer) -> str:
    return f"{base}{target.path}?container={quote(target.container)}{'&previous=true' if target.previous else ''}"


def _path_safe(name: str) -> str:
    # glob characters would make the landing path treat the staged file name as a pattern
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def from_config(config: Config) -> KubernetesLogsConnector | None:
    return KubernetesLogsConnector(config.kubernetes) if config.kubernetes.url else None
