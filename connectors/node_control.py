"""Taking a node out of service and back, per scheduler, for the [actions] policy (warehouse/actions.py): Slurm
through `scontrol` (argv only, no shell), Kubernetes through the API of [kubernetes] (a cordon)."""
from __future__ import annotations

import json
import subprocess
from typing import Protocol

from firstfault.config import Config, KubernetesSettings, SlurmSettings
from firstfault.connectors.http import ConnectorError, HttpClient


class ActionError(Exception):
    """A drain, cordon or resume the scheduler refused or did not answer."""


class NodeControl(Protocol):
    kind: str  # the actions table's `kind` of this scheduler's actions

    def take_out(self, node: str, reason: str) -> None: ...

    def command(self, node: str, reason: str) -> str: ...  # what take_out runs, as the table shows it

    def put_back(self, node: str) -> None: ...

    def node_count(self) -> int: ...


class SlurmNodes:
    """scontrol, argv only (no shell): the reason is one argument whatever it holds."""
    kind = "drain"

    def __init__(self, config: Config):
        self.settings: SlurmSettings = config.slurm

    def _cluster(self) -> list[str]:
        return ["-M", self.settings.cluster] if self.settings.cluster else []

    def drain_argv(self, node: str, reason: str) -> list[str]:
        return [self.settings.scontrol, *self._cluster(), "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]

    def command(self, node: str, reason: str) -> str:
        return json.dumps(self.drain_argv(node, reason))

    def take_out(self, node: str, reason: str) -> None:
        self._call(self.drain_argv(node, reason))

    def put_back(self, node: str) -> None:
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

    def command(self, node: str, reason: str) -> str:
        return f'PATCH /api/v1/nodes/{node} {{"spec": {{"unschedulable": true}}}}'

    def take_out(self, node: str, reason: str) -> None:
        self._patch(node, True)

    def put_back(self, node: str) -> None:
        self._patch(node, False)

    def node_count(self) -> int:
        try:
            with HttpClient(self.settings, "kubernetes") as client:
                return len(client.get_json("/api/v1/nodes").get("items") or [])
        except ConnectorError as e:
            raise ActionError(e.reason) from None

    def _patch(self, node: str, unschedulable: bool) -> None:
        try:
            with HttpClient(self.settings, "kubernetes") as client:
                client.send_json("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": unschedulable}},
                                 "application/strategic-merge-patch+json")
        except ConnectorError as e:
            raise ActionError(e.reason) from None


CONTROLS = {"slurm": SlurmNodes, "kueue": KubeNodes}
