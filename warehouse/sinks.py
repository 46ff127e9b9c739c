"""Where the worker sends each verdict besides the warehouse: a webhook (`[webhook] url`: the verdict JSON and a short
text for chat tools) and the `[automation] outputs` copies (sqlite:PATH, jsonl:PATH, warehouse/outputs.py).

Every send goes through an outbox folder first: one file per (sink, attempt), removed only once the sink took the
verdict. A sink that is down keeps its files, and each later pass of the worker tries them again, so no verdict is
lost to a failed send (a receiver may see one twice when an answer is lost: deliveries are at least once)."""
from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from firstfault.config import Config
from firstfault.connectors.http import ConnectorError, HttpClient
from firstfault.errors import BadInput
from firstfault.ids import attempt_key
from firstfault.warehouse.outputs import parse_outputs, write_outputs
from firstfault.warehouse.report import attempt_href

log = logging.getLogger(__name__)

WEBHOOK = "webhook"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def chat_text(verdict: dict, report_url: str = "") -> str:
    """A few lines a chat tool shows as they are: attempt, verdict, culprit, root line, action, report link."""
    root = verdict.get("root_cause") or {}
    kind = "/".join(p for p in (verdict.get("domain"), verdict.get("subdomain")) if p)
    root_line = next((e.get("text") for e in verdict.get("evidence") or [] if e.get("role") == "root_cause"), None)
    lines = [
        f"firstfault: {verdict['attempt_id']} {verdict['verdict']}" + (f" {kind}" if kind else ""),
        f"culprit: {', '.join(verdict.get('culprit_nodes') or []) or '-'}",
        f"root: {_one_line(root_line or root.get('summary') or '-')}",
        f"action: {verdict.get('action') or '-'}",
    ]
    if report_url:
        lines.append(f"report: {report_url.rstrip('/')}/{attempt_href(verdict['attempt_id'])}")
    return "\n".join(lines)


def _one_line(text: str, limit: int = 300) -> str:
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


@dataclass(frozen=True)
class Outbox:
    """The folder of pending sends (the worker's `<spool_dir>/outbox`)."""
    folder: Path

    def sinks(self, config: Config) -> list[str]:
        """The configured sinks by name: `webhook`, then each `[automation] outputs` entry (checked)."""
        outputs = [str(o) for o in parse_outputs(config.automation.outputs)]
        return ([WEBHOOK] if config.webhook.url else []) + outputs

    def put(self, config: Config, verdicts: Sequence[dict]) -> int:
        """Queue every verdict for every sink (a newer verdict of an attempt replaces one not sent yet)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        queued = 0
        for index, sink in enumerate(self.sinks(config)):
            for verdict in verdicts:
                path = self.folder / f"{index}~{attempt_key(verdict['attempt_id'])}.json"
                aside = path.with_name(f".{path.name}.tmp")
                aside.write_text(json.dumps({"sink": sink, "verdict": verdict, "tries": 0, "next_try": 0.0}, default=str), encoding="utf-8")
                os.replace(aside, path)
                queued += 1
        return queued

    def flush(self, config: Config, now: float | None = None) -> tuple[int, int]:
        """Try every pending send that is due; (sent, still pending). A failed send waits `[automation] retry_s`."""
        now = time.time() if now is None else now
        sent = pending = 0
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if entry["next_try"] > now:
                pending += 1
                continue
            try:
                deliver(config, entry["sink"], entry["verdict"])
            except (ConnectorError, BadInput) as e:
                entry["tries"] += 1
                entry["next_try"] = now + config.automation.retry_s
                entry["last_error"] = str(e)
                log.warning("%s: %s not sent (try %d), kept for the next pass: %s", entry["sink"], entry["verdict"]["attempt_id"], entry["tries"], e)
                path.write_text(json.dumps(entry, default=str), encoding="utf-8")
                pending += 1
                continue
            path.unlink()
            sent += 1
        return sent, pending


def deliver(config: Config, sink: str, verdict: dict) -> None:
    """One send; raises ConnectorError (webhook) or BadInput (a file output) when the sink did not take it."""
    if sink == WEBHOOK:
        with HttpClient(config.webhook, WEBHOOK) as client:
            client.send_json("POST", "", {"text": chat_text(verdict, config.automation.report_url), "verdict": verdict})
        return
    write_outputs(parse_outputs([sink]), [verdict])
