"""Where the worker sends each verdict besides the warehouse: a webhook (`[webhook] url`: the verdict JSON and a short
text for chat tools) and the `[automation] outputs` copies (sqlite:PATH, jsonl:PATH, warehouse/outputs.py).

Every send goes through an outbox folder first: one file per (sink, attempt), removed only once the sink took the
verdict. A sink that is down keeps its files, and each later pass of the worker tries them again, so no verdict is
lost to a failed send (a receiver may see one twice when an answer is lost: deliveries are at least once)."""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from firstfault.config import Config
from firstfault.connectors.http import ConnectorError, HttpClient
from firstfault.connectors.slurm_epilog import write_whole
from firstfault.errors import SPOOL_WHERE_TO, BadInput, refused_by_file_system
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
    """The folder of pending sends (the worker's `<spool_dir>/outbox`). The worker queues from its attribution loop
    and sends from a thread of its own: an entry is read, rewritten or removed under `_lock`, never during a send."""
    folder: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def set_aside(self) -> Path:
        """Where an entry that is no entry any more (not JSON, a key missing) goes, so the others are still sent."""
        return self.folder / "failed"

    def sinks(self, config: Config) -> list[str]:
        """The configured sinks by name: `webhook`, then each `[automation] outputs` entry (checked)."""
        outputs = [str(o) for o in parse_outputs(config.automation.outputs)]
        return ([WEBHOOK] if config.webhook.url else []) + outputs

    def pending(self) -> list[Path]:
        return sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []

    def put(self, config: Config, verdicts: Sequence[dict]) -> int:
        """Queue every verdict for every sink (a newer verdict of an attempt replaces one not sent yet)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        queued = 0
        for index, sink in enumerate(self.sinks(config)):
            for verdict in verdicts:
                path = self.folder / f"{index}~{attempt_key(verdict['attempt_id'])}.json"
                with self._lock:
                    write_whole(path, json.dumps({"sink": sink, "verdict": verdict, "tries": 0, "next_try": 0.0}, default=str))
                queued += 1
        return queued

    def flush(self, config: Config, now: float | None = None) -> tuple[int, int]:
        """Try every pending send that is due; (sent, still pending). A failed send waits `[automation] retry_s`,
        and the other entries of its sink wait for the next flush: a sink that is down or hangs costs one send's
        time (`timeout_s`, `retries`) per flush, however many verdicts wait for it."""
        now = time.time() if now is None else now
        sent = 0
        down: set[str] = set()
        for path in self.pending():
            read = self._read(path)
            if read is None:
                continue
            text, entry = read
            if entry["next_try"] > now or entry["sink"] in down:
                continue
            try:
                deliver(config, entry["sink"], entry["verdict"])
            except (ConnectorError, BadInput, OSError) as e:
                down.add(entry["sink"])
                entry.update(tries=entry["tries"] + 1, next_try=now + config.automation.retry_s, last_error=str(e))
                log.warning("%s: %s not sent (try %d), kept for the next pass: %s", entry["sink"], entry["verdict"]["attempt_id"], entry["tries"], e)
                self._replace(path, text, json.dumps(entry, default=str))
                continue
            log.info("%s: %s sent", entry["sink"], entry["verdict"]["attempt_id"])
            self._replace(path, text, None)
            sent += 1
        return sent, len(self.pending())

    def _read(self, path: Path) -> tuple[str, dict] | None:
        """The entry's text and content; None when it cannot be read now (kept for the next flush) or is no entry
        (set aside with a warning)."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("%s: not readable now, kept for the next pass: %s", path, e)
            return None
        try:
            entry = json.loads(text)
            if not (isinstance(entry["sink"], str) and isinstance(entry["verdict"]["attempt_id"], str)):
                raise TypeError("sink or verdict.attempt_id is not a string")
            entry.update(tries=int(entry["tries"]), next_try=float(entry["next_try"]))
        except (ValueError, KeyError, TypeError) as e:
            log.warning("%s: not an outbox entry (%s: %s); set aside in %s", path.name, type(e).__name__, e, self.set_aside)
            try:
                self.set_aside.mkdir(exist_ok=True)
                path.replace(self.set_aside / path.name)
            except OSError as moved:
                log.warning("%s: not set aside: %s", path.name, moved)
            return None
        return text, entry

    def _replace(self, path: Path, was: str, text: str | None) -> None:
        """After a send: write the entry back (`text`) or remove it (None), unless `put` replaced it meanwhile (the
        newer verdict is sent next). A failure leaves the entry as it was: it is tried again."""
        with self._lock:
            try:
                if path.read_text(encoding="utf-8") != was:
                    return
                if text is None:
                    path.unlink()
                else:
                    write_whole(path, text)
            except OSError as e:
                refused = refused_by_file_system(e, self.folder, SPOOL_WHERE_TO)
                if refused is not None:  # sent, but never removed: stop, rather than send it again every pass
                    raise refused from None
                log.warning("%s: not updated after its send (%s): it is tried again", path.name, e)


def deliver(config: Config, sink: str, verdict: dict) -> None:
    """One send; raises ConnectorError (webhook) or BadInput (a file output) when the sink did not take it."""
    if sink == WEBHOOK:
        with HttpClient(config.webhook, WEBHOOK) as client:
            client.send_json("POST", "", {"text": chat_text(verdict, config.automation.report_url), "verdict": verdict})
        return
    write_outputs(parse_outputs([sink]), [verdict])
