"""`firstfault epilog`: Slurm's EpilogSlurmctld entry point. It runs on the controller for every finished job, as
SlurmUser, with the job in its environment (no job state): it writes one spool file per failed job for
`firstfault worker` (firstfault/worker.py) and nothing else. No network, no accounting query, no import beyond the
standard library, and never an exit status that would mark the epilog failed."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

QUEUE = "queue"  # the spool's folder of queued jobs
# a part (`.NAME.tmp`) is written and renamed within a second: one this much older than the worker's clock was cut
# short (a full spool, a killed epilog), a margin far beyond any writer's clock skew
STALE_PART_S = 3600.0


def write_whole(path: Path, text: str, *, mtime_ns: int | None = None) -> None:
    """Write `text` aside and rename it to `path`, so a reader sees the old file or the new one, never half of one; a
    write cut short (a full disk) leaves neither a part nor a damaged `path`. `mtime_ns` keeps a file's place in
    the queue's oldest-first order when it is rewritten."""
    aside = path.with_name(f".{path.name}.tmp")
    try:
        aside.write_text(text, encoding="utf-8")
        if mtime_ns is not None:
            os.utime(aside, ns=(mtime_ns, mtime_ns))
        os.replace(aside, path)
    except OSError:
        aside.unlink(missing_ok=True)
        raise


@dataclass
class Spool:
    """The spool folder: `queue` (the epilog writes), `done` (one marker per attributed attempt), `failed` (set
    aside), and the worker's `outbox` (warehouse/sinks.py)."""
    root: Path

    @property
    def queue(self) -> Path:
        return self.root / QUEUE

    @property
    def done(self) -> Path:
        return self.root / "done"

    @property
    def set_aside(self) -> Path:
        return self.root / "failed"

    @property
    def outbox(self) -> Path:
        return self.root / "outbox"

    def check_writable(self) -> None:
        """Write and remove a file in the spool and its outbox (made if need be) and in its queue when there is one
        (never made here: the epilog makes it as SlurmUser, who must write in it); an OSError naming the folder that
        cannot be written. The file is a part (`.NAME.tmp`): removed once stale if this is cut short."""
        for folder in [self.root, self.outbox] + ([self.queue] if self.queue.is_dir() else []):
            probe = folder / f".writable-{os.getpid()}.tmp"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(folder)) from None

    def queued(self) -> list[Path]:
        """Queued files, oldest first (names start with the job id, so by time written)."""
        files = [p for p in self.queue.glob("*.json")] if self.queue.is_dir() else []
        return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))

    def remove_stale_parts(self, now: float) -> list[Path]:
        """Remove the parts of queue files and outbox entries whose write was cut short; the ones removed."""
        parts = [p for folder in (self.queue, self.outbox) for p in folder.glob(".*.tmp")]
        stale = []
        for part in parts:
            try:
                if part.stat().st_mtime < now - STALE_PART_S:
                    part.unlink()
                    stale.append(part)
            except FileNotFoundError:  # renamed or removed meanwhile: not stale
                continue
        return stale


def is_failed(env: Mapping[str, str]) -> bool:
    """The job's exit code (`SLURM_JOB_EXIT_CODE2`, "exit:signal") is not 0:0, or its derived exit code (the highest
    of its steps', `SLURM_JOB_DERIVED_EC`) is not 0. A missing variable counts as a success."""
    return env.get("SLURM_JOB_EXIT_CODE2", "0:0").strip() not in ("0:0", "") or env.get("SLURM_JOB_DERIVED_EC", "0").strip() not in ("0", "")


def queued_job(env: Mapping[str, str], now: float) -> dict:
    """What the worker needs to find the attempt: the job (an array task as ARRAYID_TASK), its restart count (the
    attempt number) and when it ended."""
    job_id = env.get("SLURM_JOB_ID", "").strip()
    array_job, array_task = env.get("SLURM_ARRAY_JOB_ID", "").strip(), env.get("SLURM_ARRAY_TASK_ID", "").strip()
    return {
        "job_id": f"{array_job}_{array_task}" if array_job and array_task else job_id,
        "job_id_raw": job_id,
        "restart_count": int(env.get("SLURM_RESTART_COUNT", "0").strip() or 0),
        "cluster": env.get("SLURM_CLUSTER_NAME", ""),
        "exit_code": env.get("SLURM_JOB_EXIT_CODE2", ""),
        "derived_exit_code": env.get("SLURM_JOB_DERIVED_EC", ""),
        "queued_at": now,
    }


def queue_job(spool_dir: str, env: Mapping[str, str], *, queue_all: bool = False) -> Path | None:
    """Write the spool file of a failed job (of every job with `queue_all`); None when the job is not queued. The
    file appears whole (written aside, then renamed): the worker never reads half of one."""
    if not env.get("SLURM_JOB_ID", "").strip().isdigit():
        raise ValueError("SLURM_JOB_ID is not set to a job id")
    if not (queue_all or is_failed(env)):
        return None
    now = time.time()
    job = queued_job(env, now)
    folder = Path(spool_dir) / QUEUE
    folder.mkdir(parents=True, exist_ok=True)
    # unique per call: the same job queued twice is two files, and the worker attributes it once
    name = f"{job['job_id_raw']}.{job['restart_count']}.{time.time_ns()}.{os.getpid()}.json"
    write_whole(folder / name, json.dumps(job))
    return folder / name
