"""`firstfault worker`: attributes the jobs `firstfault epilog` queued (docs/automation.md).

Each spool file waits `settle_s` after the worker first saw it (late log lines, the final accounting record), then
the job's attempt (restart count) is resolved through the Slurm connector, attributed, stored, handed to the sinks
(warehouse/sinks.py) and to the `[actions]` policy (warehouse/actions.py). While accounting does not show the
attempt as ended, or one of its log sources is still missing, it is tried again every `retry_s` until `give_up_s`;
any other error (a warehouse busy or damaged for a while, a full disk) is tried again with a doubling wait, never
given up. Every delay is measured on the worker's clock from the time it first saw the file, which it records in
the file: the epilog's host may keep another time. A `done` marker per attempt makes every (job, restart count)
attributed once, however often it was queued. The outbox is sent from a thread of its own, so a sink that hangs
never holds back an attribution or an action."""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from firstfault.warehouse.actions import Decision, apply_actions, check_settings
from firstfault.config import ActionSettings, Config
from firstfault.connectors.registry import resolve_scheduler_specs
from firstfault.connectors.static_context import load_static_context
from firstfault.connectors.slurm_epilog import Spool, write_whole
from firstfault.errors import SPOOL_WHERE_TO, BadInput, refused_by_file_system
from firstfault.ids import attempt_key
from firstfault.run import load_rule_set, run_attempts
from firstfault.warehouse.read import stored_verdicts
from firstfault.warehouse.sinks import Outbox

log = logging.getLogger(__name__)

# an attempt's run in accounting that no longer changes (a requeued attempt ends REQUEUED)
FINAL_STATES = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                "REQUEUED", "TIMEOUT"}
# `worker --once`'s exit status while a job or a send is still queued (sysexits' EX_TEMPFAIL: try again later)
STILL_QUEUED = 75


class NotYet(Exception):
    """The attempt cannot be attributed yet (not in accounting, not ended, a log source missing)."""


class Worker:
    def __init__(self, config: Config):
        if not config.slurm.enabled:
            raise BadInput("firstfault.toml", "slurm.enabled", "the worker attributes Slurm jobs: set [slurm] enabled = true")
        self.config = config
        self.spool = Spool(Path(config.automation.spool_dir))
        try:  # before any work: never a loop of refusals
            self.spool.check_writable()
        except OSError as e:
            raise refused_by_file_system(e, where_to=SPOOL_WHERE_TO) or e from None
        self.outbox = Outbox(self.spool.outbox)
        self.outbox.sinks(config)  # checks [automation] outputs and [actions] before any work
        check_settings(config.actions)
        self.rules = load_rule_set(config)
        self.next_try: dict[str, float] = {}  # spool file name -> when it is tried again
        self.errors: dict[str, int] = {}  # spool file name -> failed attributions in a row

    def run(self, stop: threading.Event) -> None:
        """Attribute every `poll_s` until `stop` is set, while a thread of its own sends the outbox."""
        ended = threading.Event()  # ends the sender with this loop, however it ends
        failures: list[Exception] = []
        threading.Thread(target=self._send, args=(ended, failures), name="firstfault-outbox", daemon=True).start()
        try:
            while not stop.is_set() and not ended.is_set():
                self.attribute_due()
                stop.wait(self.config.automation.poll_s)
        finally:
            ended.set()
        if failures:
            raise failures[0]

    def _send(self, ended: threading.Event, failures: list[Exception]) -> None:
        try:
            while not ended.is_set():
                self.outbox.flush(self.config)
                ended.wait(self.config.automation.poll_s)
        except Exception as e:  # a fault of the sender's own: the worker stops with it rather than never send again
            failures.append(e)
            ended.set()

    def run_once(self) -> int:
        """One pass for cron: every due spool file, then one flush of the outbox (a sink that is down is tried once);
        how many spool files and sends are still queued."""
        self.run_pass()
        return len(self.spool.queued()) + len(self.outbox.pending())

    def run_pass(self, now: float | None = None) -> list[str]:
        """Every due spool file, then every due send; the attempt ids attributed."""
        attributed = self.attribute_due(now)
        self.outbox.flush(self.config, now)
        return attributed

    def attribute_due(self, now: float | None = None) -> list[str]:
        """Every due spool file, oldest first; the attempt ids attributed."""
        now = time.time() if now is None else now
        for part in self.spool.remove_stale_parts(now):
            log.warning("%s: removed, a write cut short", part)
        taken = [self.take(path, now) for path in self.spool.queued()]
        return [attempt for attempt in taken if attempt]

    def take(self, path: Path, now: float) -> str | None:
        settings = self.config.automation
        try:
            job = json.loads(path.read_text(encoding="utf-8"))
            ref = f"{job['job_id']}:{int(job['restart_count'])}"
            seen_at = float(job.get("seen_at", now))
        except FileNotFoundError:  # taken by another worker meanwhile
            return None
        except OSError as e:
            log.warning("%s: not readable now (%s); next try in the next pass", path.name, e)
            return None
        except (ValueError, KeyError, TypeError) as e:
            log.warning("%s: not a spool file (%s); set aside", path.name, e)
            self._set_aside(path)
            return None
        marker = self.spool.done / f"{attempt_key(ref)}.json"
        if marker.exists():  # queued twice: attributed already
            path.unlink(missing_ok=True)
            return None
        if "seen_at" not in job and not self._record_seen(path, job, now):
            return None
        if now < max(seen_at + settings.settle_s, self.next_try.get(path.name, 0.0)):
            return None
        last_try = now >= seen_at + settings.give_up_s
        try:
            verdicts = self.attribute(ref, last_try=last_try)
        except NotYet as e:
            if last_try:
                log.warning("job %s: %s after %g s; set aside", ref, e, settings.give_up_s)
                self._set_aside(path)
                return None
            log.info("job %s: %s; next try in %g s", ref, e, settings.retry_s)
            self.next_try[path.name] = now + settings.retry_s
            return None
        except Exception as e:  # a damaged or busy warehouse, an unreadable log, a full disk: it may pass
            errors = self.errors[path.name] = self.errors.get(path.name, 0) + 1
            wait = min(settings.retry_s * 2 ** (errors - 1), max(settings.retry_s, settings.give_up_s))
            log.warning("job %s: %s: %s; next try in %g s", ref, type(e).__name__, e, wait)
            self.next_try[path.name] = now + wait
            return None
        self.outbox.put(self.config, verdicts)
        decisions = apply_actions(self.config, verdicts, "slurm")
        self.spool.done.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({**job, "attempt_ids": [v["attempt_id"] for v in verdicts], "attributed_at": now}), encoding="utf-8")
        path.unlink(missing_ok=True)
        self.next_try.pop(path.name, None)
        self.errors.pop(path.name, None)
        for verdict in verdicts:
            print(attempt_line(ref, verdict, decisions, self.config.actions), flush=True)
        return verdicts[0]["attempt_id"]

    def _record_seen(self, path: Path, job: dict, now: float) -> bool:
        """Write when this worker first saw the file into it (its place in the queue kept), so a later pass or
        process measures from the same moment; False when it could not (tried again in the next pass)."""
        try:
            write_whole(path, json.dumps({**job, "seen_at": now}), mtime_ns=path.stat().st_mtime_ns)
        except OSError as e:
            if refused_by_file_system(e):  # a spool that turned read-only: stop, rather than fail again every pass
                raise refused_by_file_system(e, self.spool.queue, SPOOL_WHERE_TO) from None
            log.warning("%s: not updated (%s); next try in the next pass", path.name, e)
            return False
        return True

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
        self.next_try.pop(path.name, None)
        self.errors.pop(path.name, None)


def attempt_line(ref: str, verdict: dict, decisions: list[Decision], actions: ActionSettings) -> str:
    """The worker's line about one attempt: verdict, culprit, and the action taken on each node or why none was."""
    kind = "/".join(p for p in (verdict.get("domain"), verdict.get("subdomain")) if p)
    action = verdict.get("action") or "none"
    mine = [d for d in decisions if d.attempt_id == verdict["attempt_id"]]
    if mine:
        why = {d: f" ({d.reason})" if d.status in ("skipped", "failed") else "" for d in mine}
        taken = ": " + "; ".join(f"{d.node or '-'} {d.status}{why[d]}" for d in mine)
    elif action == "none":
        taken = ""
    elif action != "drain_node":
        taken = ": not taken (the worker acts on drain_node only)"
    else:
        taken = ": not taken ([actions] enabled = false)"
    return (f"{verdict['attempt_id']} (job {ref}): {verdict['verdict']}{' ' + kind if kind else ''}; "
            f"culprit {', '.join(verdict.get('culprit_nodes') or []) or '-'}; action {action}{taken}")
