"""Taking a node out of service and back, per scheduler, for the [actions] policy (warehouse/actions.py): Slurm
through `scontrol` (argv only, no shell), Kubernetes through the API of [kubernetes] (a cordon)."""
from __future__ import annotations

import json
import re
import subprocess
from typing import Protocol
from urllib.parse import quote

from firstfault.config import Config, KubernetesSettings, SlurmSettings
from firstfault.connectors.http import ConnectorError, HttpClient


class ActionError(Exception):
    """A drain, cordon or resume the scheduler refused or did not answer."""


class NodeControl(Protocol):
    kind: str  # the actions table's `kind` of this scheduler's actions

    def name_problem(self, node: str) -> str | None: ...  # why `node` cannot name exactly one node here

    def take_out(self, node: str, reason: str) -> None: ...

    def command(self, node: str, reason: str) -> str: ...  # what take_out runs, as the table shows it

    def is_out(self, node: str, reason: str) -> bool: ...  # whether take_out(node, reason) has taken effect

    def put_back(self, node: str) -> None: ...

    def node_count(self) -> int: ...


# what scontrol reads as more than one node: a hostlist (`node[1-4]`, `a,b`, `a b`) or the keyword for every node
_SLURM_MANY = re.compile(r"[\[\],\s]")
# a Kubernetes object name (RFC 1123 subdomain): no `/`, `?`, `%` or `..` to leave the /api/v1/nodes/NAME path
_KUBE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class SlurmNodes:
    """scontrol, argv only (no shell): the reason is one argument whatever it holds."""
    kind = "drain"

    def __init__(self, config: Config):
        self.settings: SlurmSettings = config.slurm

    def _cluster(self) -> list[str]:
        return ["-M", self.settings.cluster] if self.settings.cluster else []

    def name_problem(self, node: str) -> str | None:
        if node.upper() == "ALL":
            return "ALL is scontrol's word for every node"
        if _SLURM_MANY.search(node):
            return "hostlist syntax names several nodes"
        if not node or "=" in node or any(ord(ch) < 32 or ord(ch) == 127 for ch in node):
            return "not a Slurm node name"
        return None

    def drain_argv(self, node: str, reason: str) -> list[str]:
        return [self.settings.scontrol, *self._cluster(), "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]

    def command(self, node: str, reason: str) -> str:
        return json.dumps(self.drain_argv(node, reason))

    def take_out(self, node: str, reason: str) -> None:
        _check(self, node)
        self._call(self.drain_argv(node, reason))

    def is_out(self, node: str, reason: str) -> bool:
        """Drained (or draining) with this reason: Slurm keeps the reason of the drain that holds the node."""
        _check(self, node)
        shown = self._call([self.settings.scontrol, *self._cluster(), "--oneliner", "show", "node", node])
        state = re.search(r"\bState=(\S+)", shown)
        return bool(state and "DRAIN" in state.group(1) and f"Reason={reason}" in shown)

    def put_back(self, node: str) -> None:
        _check(self, node)
        self._call([self.settings.scontrol, *self._cluster(), "update", f"NodeName={node}", "State=RESUME"])

    def node_count(self) -> int:
        sinfo = str(self.settings.scontrol).rsplit("scontrol", 1)[0] + "sinfo"  # beside a configured scontrol path
        return len(set(self._call([sinfo, *self._cluster(), "-h", "-N", "-o", "%N"]).split()))

    def _call(self, argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.settings.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ActionError(f"{argv[0]}: {e}") from None
        if done.returncode:
            raise ActionError(f"{' '.join(argv[:3])} … failed (exit {done.returncode}): {done.stderr.strip()[:300]}")
        return done.stdout


class KubeNodes:
    """The Kubernetes API of [kubernetes]: a cordon is `PATCH /api/v1/nodes/NAME` with spec.unschedulable (what
    `kubectl cordon` sends); the reason has no place on the Node and stays in the actions table."""
    kind = "cordon"

    def __init__(self, config: Config):
        self.settings: KubernetesSettings = config.kubernetes

    def name_problem(self, node: str) -> str | None:
        if len(node) > 253 or not _KUBE_NAME.match(node):
            return "not a Kubernetes node name"
        return None

    def command(self, node: str, reason: str) -> str:
        return f'PATCH {_node_path(node)} {{"spec": {{"unschedulable": true}}}}'

    def take_out(self, node: str, reason: str) -> None:
        self._patch(node, True)

    def is_out(self, node: str, reason: str) -> bool:
        _check(self, node)
        try:
            with HttpClient(self.settings, "kubernetes") as client:
                return bool((client.get_json(_node_path(node)).get("spec") or {}).get("unschedulable"))
        except ConnectorError as e:
            raise ActionError(e.reason) from None

    def put_back(self, node: str) -> None:
        self._patch(node, False)

    def node_count(self) -> int:
        try:
            with HttpClient(self.settings, "kubernetes") as client:
                return len(client.get_json("/api/v1/nodes").get("items") or [])
        except ConnectorError as e:
            raise ActionError(e.reason) from None

    def _patch(self, node: str, unschedulable: bool) -> None:
        _check(self, node)
        try:
            with HttpClient(self.settings, "kubernetes") as client:
                client.send_json("PATCH", _node_path(node), {"spec": {"unschedulable": unschedulable}},
                                 "application/strategic-merge-patch+json")
        except ConnectorError as e:
            raise ActionError(e.reason) from None


def _check(control: NodeControl, node: str) -> None:
    """ActionError unless `node` names exactly one node to `control` (the policy refuses such names before; this
    holds for every caller)."""
    if problem := control.name_problem(node):
        raise ActionError(f"node {node!r}: {problem}")


def _node_path(node: str) -> str:
    """The Node's API path, its name one path segment whatever it holds."""
    return f"/api/v1/nodes/{quote(node, safe='')}"


CONTROLS = {"slurm": SlurmNodes, "kueue": KubeNodes}
