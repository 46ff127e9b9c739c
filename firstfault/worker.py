"""`firstfault worker`: attributes the jobs `firstfault epilog` queued (docs/automation.md).

Each spool file waits `settle_s` after the job's end (late log lines, the final accounting record), then the job's
attempt (restart count) is resolved through the Slurm connector, attributed, stored, handed to the sinks
(warehouse/sinks.py) and to the `[actions]` policy (warehouse/actions.py). While accounting does not show the
attempt as ended, or one of its log sources is still missing, it is tried again every `retry_s` until `give_up_s`.
A `done` marker per attempt makes every (job, restart count) attributed once, however often it was queued."""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from firstfault.warehouse.actions import apply_actions, check_settings
from firstfault.config import Config
from firstfault.connectors.registry import resolve_scheduler_specs
from firstfault.connectors.static_context import load_static_context
from firstfault.connectors.slurm_epilog import Spool
from firstfault.errors import BadInput
from firstfault.ids import attempt_key
from firstfault.run import load_rule_set, run_attempts
from firstfault.warehouse.read import stored_verdicts
from firstfault.warehouse.sinks import Outbox

log = logging.getLogger(__name__)

# an attempt's run in accounting that no longer changes (a requeued attempt ends REQUEUED)
FINAL_STATES = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                "REQUEUED", "TIMEOUT"}


class NotYet(Exception):
    """The attempt cannot be attributed yet (not in accounting, not ended, a log source missing)."""


class Worker:
    def __init__(self, config: Config):
        if not config.slurm.enabled:
            raise BadInput("firstfault.toml", "slurm.enabled", "the worker attributes Slurm jobs: set [slurm] enabled = true")
        self.config = config
        self.spool = Spool(Path(config.automation.spool_dir))
        self.outbox = Outbox(self.spool.root / "outbox")
        self.outbox.sinks(config)  # checks [automation] outputs and [actions] before any work
        check_settings(config.actions)
        self.rules = load_rule_set(config)
        self.next_try: dict[str, float] = {}  # spool file name -> when it is tried again

    def run(self, stop: threading.Event, *, once: bool = False) -> None:
        """Pass over the spool every `poll_s` until `stop` is set (with `once`: until the spool and the outbox are
        empty, for tests and cron)."""
        while not stop.is_set():
            self.run_pass()
            if once and not self.spool.queued() and not any(self.outbox.folder.glob("*.json")):
                return
            stop.wait(self.config.automation.poll_s)

    def run_pass(self, now: float | None = None) -> list[str]:
        """One pass: every due spool file, then every due send; the attempt ids attributed."""
        taken = [self.take(path, time.time() if now is None else now) for path in self.spool.queued()]
        self.outbox.flush(self.config, now)
        return [attempt for attempt in taken if attempt]

    def take(self, path: Path, now: float) -> str | None:
        settings = self.config.automation
        try:
            job = json.loads(path.read_text(encoding="utf-8"))
            ref = f"{job['job_id']}:{int(job['restart_count'])}"
            queued_at = float(job["queued_at"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("%s: not a spool file (%s); set aside", path.name, e)
            self._set_aside(path)
            return None
        marker = self.spool.done / f"{attempt_key(ref)}.json"
        if marker.exists():  # queued twice: attributed already
            path.unlink(missing_ok=True)
            return None
        if now < max(queued_at + settings.settle_s, self.next_try.get(path.name, 0.0)):
            return None
        last_try = now >= queued_at + settings.give_up_s
        try:
            verdicts = self.attribute(ref, last_try=last_try)
        except Exception as e:  # NotYet, or a failed attribution (an unreadable log, a full disk): tried again, not fatal
            if last_try:
                log.warning("job %s: %s after %g s; set aside", ref, e, settings.give_up_s)
                self._set_aside(path)
                return None
            log.log(logging.INFO if isinstance(e, NotYet) else logging.WARNING, "job %s: %s; next try in %g s", ref, e, settings.retry_s)
            self.next_try[path.name] = now + settings.retry_s
            return None
        self.outbox.put(self.config, verdicts)
        apply_actions(self.config, verdicts, "slurm")
        self.spool.done.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({**job, "attempt_ids": [v["attempt_id"] for v in verdicts], "attributed_at": now}), encoding="utf-8")
        path.unlink(missing_ok=True)
        self.next_try.pop(path.name, None)
        return verdicts[0]["attempt_id"]

    def attribute(self, ref: str, *, last_try: bool) -> list[dict]:
        """Resolve, attribute and store the attempt; NotYet while accounting or a log source is not ready (on the
        last try a missing source no longer holds the verdict back)."""
        try:
            specs = resolve_scheduler_specs(self.config, "slurm", ref, f"spool job {ref}")
        except BadInput as e:  # not in accounting yet, or the attempt not started there yet
            raise NotYet(e.problem) from None
        contexts = [load_static_context(p) for p in specs]
        unsettled = [c for c in contexts if c.state not in FINAL_STATES or c.end is None]
        if unsettled:
            raise NotYet(f"accounting shows {unsettled[0].state or 'no state'}")
        run_attempts(contexts, self.config, flow="worker", rules=self.rules)
        verdicts = stored_verdicts(self.config.warehouse.path, [c.attempt_id for c in contexts])
        missing = [r for v in verdicts for r in v.get("connector_reports") or [] if r["status"] == "missing"]
        if missing and not last_try:
            raise NotYet(f"{missing[0]['source']} {missing[0]['uri']} is missing")
        return verdicts

    def _set_aside(self, path: Path) -> None:
        self.spool.set_aside.mkdir(parents=True, exist_ok=True)
        path.replace(self.spool.set_aside / path.name)
