"""Slurm execution contexts from accounting: `attribute --slurm JOBID[:ATTEMPT]` and nightly discovery.

`sacct` is the source of truth once a job has ended (the controller forgets it after `MinJobAge`). Each run of a job
is one attempt: a requeued job has one accounting record per start (`sacct --duplicates`), numbered 0, 1, … by start
time; array tasks (`123_7`) and het components (`123+0`) are workloads of their own. Two output formats are read:

* `--parsable2` (`|`-separated, header line): every version; the default.
* `--json` (`[slurm] json = true`), both shapes: 21.08–22.05 (`openapi/dbv0.0.3x`: scalar state and status, plain
  integers) and 23.11+ (`data_parser/v0.0.40`+: lists for state/status, `{set, infinite, number}` wrappers, the
  `stdout`/`stderr` patterns). Before v0.0.40 the JSON prints every normal exit as SUCCESS/0 (only signals are
  right), so exit codes are then taken from a text query of the same jobs.

Every call runs with `TZ=UTC`, so the zone-less times `sacct` prints are UTC (and `-S`/`-E` are read as UTC).

The job's output file (StdOut/StdErr) becomes the attempt's `applog`: from sacct when it records it (23.11+), else
from `scontrol show job` while the controller still holds the job, else Slurm's default `slurm-%j.out` in the work
dir when that file exists. `[slurm] logs` adds path templates per source (`{node}` is left for the static context).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from firstfault.config import Config, SlurmSettings
from firstfault.connectors.hostlist import expand_hostlist
from firstfault.connectors.static_context import AttemptContext, LogSpec
from firstfault.errors import BadInput

# what `sacct` is asked for; StdOut/StdErr only where `sacct --helpformat` offers them (newer releases)
FIELDS = ("JobID", "JobIDRaw", "JobName", "Cluster", "User", "Partition", "State", "ExitCode", "DerivedExitCode",
          "Reason", "Submit", "Start", "End", "NNodes", "NodeList", "AllocTRES", "WorkDir")
OUTPUT_FIELDS = ("StdOut", "StdErr")
# states a run can end in (the short codes `--state` takes); REQUEUED is the end of every run but the last
ENDED_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,RQ,TO"
BASE_STATES = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "CONFIGURING", "COMPLETING", "DEADLINE", "FAILED", "NODE_FAIL",
               "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "RUNNING", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD",
               "REQUEUED", "RESIZING", "REVOKED", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED", "SUSPENDED",
               "TIMEOUT"}
TEMPLATE_PLACEHOLDERS = ("job_id", "job_id_raw", "job_name", "cluster", "user", "attempt", "workdir", "node")
JOB_REF = re.compile(r"(?P<job>\d+(?:[_+]\d+)?)(?::(?P<attempt>\d+))?")
IDS_PER_CALL = 200  # job ids per `sacct -j` call in discovery (keeps the command line short)
NOT_AN_ARRAY_TASK = "4294967294"  # what `%a` expands to in a job that is not an array task (Slurm's NO_VAL)


class SlurmError(Exception):
    """sacct/scontrol failed, or printed something that cannot be read."""


@dataclass(frozen=True)
class Step:
    step_id: str  # batch, extern, 0, 1, ... (the part after `JOBID.`)
    name: str
    state: str
    exit_code: str | None


@dataclass(frozen=True)
class JobRun:
    """One run of one job: an accounting record and its steps (a requeued job has one per start)."""
    job_id: str  # as Slurm prints it, the workload id: 123, 123_7 (array task), 123+0 (het component)
    job_id_raw: str
    name: str
    cluster: str
    user: str
    partition: str
    state: str  # the base state word (CANCELLED)
    state_text: str  # as printed (CANCELLED by 0)
    exit_code: str | None  # status:signal
    derived_exit_code: str | None
    reason: str
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    nodes: tuple[str, ...]
    tres: dict[str, str]  # allocated TRES: cpu -> 1, gres/gpu -> 8, gres/gpu:h100 -> 8
    workdir: str
    stdout: str = ""  # output file pattern as sacct stores it (`%j` not expanded), "" when sacct does not say
    stderr: str = ""
    steps: tuple[Step, ...] = ()

    @property
    def array_ids(self) -> tuple[str, str] | None:
        """(array job id, task id) of an array task."""
        job, sep, task = self.job_id.partition("_")
        return (job, task) if sep else None


# --- parsing (pure functions over captured output) -----------------------------------------------------------------

def parse_parsable(text: str) -> list[JobRun]:
    """`sacct --parsable2` output with its header line: allocation rows, each followed by its step rows."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip().lower() for h in lines[0].split("|")]
    if "jobid" not in header:
        raise SlurmError(f"sacct output has no header line with JobID: {lines[0][:120]!r}")
    runs: list[JobRun] = []
    for number, line in enumerate(lines[1:], start=2):
        values = line.split("|")
        if len(values) != len(header):
            raise SlurmError(f"sacct output line {number} has {len(values)} fields, the header {len(header)}")
        row = dict(zip(header, values))
        job_id, dot, step_id = row["jobid"].partition(".")
        if dot:
            # steps are printed right after the run they belong to (with --duplicates, after each run)
            if runs and runs[-1].job_id == job_id:
                run = runs[-1]
                runs[-1] = replace(run, steps=run.steps + (Step(step_id, row.get("jobname", ""), _base_state(row.get("state", "")),
                                                                 _exit_text(row.get("exitcode", ""))),))
            continue
        state_text = row.get("state", "")
        runs.append(JobRun(
            job_id=job_id, job_id_raw=row.get("jobidraw") or job_id, name=row.get("jobname", ""),
            cluster=row.get("cluster", ""), user=row.get("user", ""), partition=row.get("partition", ""),
            state=_base_state(state_text), state_text=state_text, exit_code=_exit_text(row.get("exitcode", "")),
            derived_exit_code=_exit_text(row.get("derivedexitcode", "")), reason=_text(row.get("reason", "")),
            submit=_time_text(row.get("submit", "")), start=_time_text(row.get("start", "")),
            end=_time_text(row.get("end", "")), nodes=_nodes(row.get("nodelist", ""), job_id),
            tres=_tres_text(row.get("alloctres", "")), workdir=row.get("workdir", ""),
            stdout=_text(row.get("stdout", "")), stderr=_text(row.get("stderr", "")),
        ))
    return runs


def parse_json(text: str) -> tuple[list[JobRun], bool]:
    """`sacct --json` in the 21.08–22.05 or the 23.11+ shape. Returns the runs and whether their exit codes can be
    trusted (not before data_parser v0.0.40: the older serializer prints every normal exit as SUCCESS/0)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SlurmError(f"sacct --json printed something that is not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise SlurmError("sacct --json printed no `jobs` list")
    runs = [_run_from_json(job) for job in doc["jobs"] if isinstance(job, dict)]
    return runs, _data_parser_version(doc.get("meta") or {}) >= (0, 0, 40)


def merge_exit_codes(runs: Sequence[JobRun], text_runs: Sequence[JobRun]) -> list[JobRun]:
    """Exit codes of `runs` replaced by those of the same runs read as text: the n-th run of a raw job id in one
    listing is the n-th in the other, steps match by id."""
    by_key = dict(_numbered(text_runs))
    out = []
    for key, run in _numbered(runs):
        text = by_key.get(key)
        if text is None:
            out.append(run)
            continue
        step_codes = {s.step_id: s.exit_code for s in text.steps}
        steps = tuple(replace(s, exit_code=step_codes.get(s.step_id, s.exit_code)) for s in run.steps)
        out.append(replace(run, exit_code=text.exit_code, derived_exit_code=text.derived_exit_code, steps=steps))
    return out


def parse_scontrol(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show job -o` (one job per line of `Key=Value`): fields by raw job id."""
    jobs = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("JobId="):
            continue
        # values hold spaces only in Command/Comment/paths; a new key starts where ` Key=` does
        fields = dict(part.split("=", 1) for part in re.split(r" (?=[A-Za-z][\w/:]*=)", line) if "=" in part)
        jobs[fields["JobId"]] = fields
    return jobs


def expand_output_pattern(pattern: str, run: JobRun) -> str:
    """A StdOut/StdErr pattern as the batch step wrote it: `%j` job id, `%x` name, `%u` user, `%A`/`%a` array job
    and task, `%N` first node, `%n`/`%t` node and task 0, `%s` batch, `%J` job.batch, `%%`; `%4j` zero-pads
    numbers. A pattern with a backslash is not expanded (Slurm's escape)."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    array = run.array_ids
    values = {
        "j": run.job_id_raw, "J": f"{run.job_id_raw}.batch", "x": run.name, "u": run.user,
        "A": array[0] if array else run.job_id_raw, "a": array[1] if array else NOT_AN_ARRAY_TASK,
        "N": run.nodes[0].split(".")[0] if run.nodes else "", "n": "0", "t": "0", "s": "batch",
    }
    numeric = {"j", "A", "a", "n", "t"}

    def one(m: re.Match) -> str:
        width, key = m.group(1), m.group(2)
        if key == "%":
            return "%"
        if key == "b":  # array task id modulo 10 (of NO_VAL outside an array, as for %a)
            return str(int(values["a"]) % 10)
        value = values.get(key)
        if value is None:
            return m.group(0)
        return value.zfill(min(int(width), 10)) if width and key in numeric else value

    return re.sub(r"%(\d*)([%AabJjNnstux])", one, pattern)


# --- the connector -------------------------------------------------------------------------------------------------

class SlurmConnector:
    name = "slurm"

    def __init__(self, settings: SlurmSettings):
        self.settings = settings
        self._offered_fields: set[str] | None = None

    def resolve(self, ref: str) -> list[AttemptContext]:
        """The attempts of `JOBID[:ATTEMPT]` (`123`, `123_7`, `123+0`, `123:1`); every array task / het component
        of a plain job id. BadInput (exit 2) when the id is malformed, unknown, or sacct cannot answer."""
        m = JOB_REF.fullmatch(ref.strip())
        if not m:
            raise BadInput("--slurm", "slurm", f"{ref!r} is not JOBID[:ATTEMPT] (e.g. 123, 123_7, 123+0, 123:1)")
        job = m.group("job")
        try:
            runs = [r for r in self._query(["-j", job]) if _belongs_to(r, job)]
            contexts = self._contexts(runs, self._output_files(job))
        except SlurmError as e:
            raise BadInput("--slurm", "slurm", str(e)) from None
        if not contexts:
            if runs:
                raise BadInput("--slurm", "slurm", f"job {job} has not started (state {runs[-1].state_text})")
            where = f" of cluster {self.settings.cluster}" if self.settings.cluster else ""
            raise BadInput("--slurm", "slurm", f"job {job} is not in the Slurm accounting records{where}")
        if m.group("attempt") is None:
            return contexts
        wanted = int(m.group("attempt"))
        chosen = [c for c in contexts if c.attempt == wanted]
        if not chosen:
            have = ", ".join(f"{c.workload_id}:{c.attempt}" for c in contexts)
            raise BadInput("--slurm", "slurm", f"job {job} has no attempt {wanted} (attempts: {have})")
        return chosen

    def discover(self, start: datetime, end: datetime) -> list[AttemptContext]:
        """Every attempt that ended in [start, end): the jobs with a run that ended in the window, read in full (so
        attempt numbers count the runs before the window too), then filtered by end. Raises SlurmError."""
        listing = ["-X", "-S", _sacct_time(start), "-E", _sacct_time(end), f"--state={ENDED_STATES}"]
        if self.settings.partitions:
            listing += ["-r", ",".join(self.settings.partitions)]
        ended = self._query_text(listing)
        job_ids = sorted({r.job_id for r in ended if r.end is not None and start <= r.end < end}, key=_natural)
        runs: list[JobRun] = []
        for i in range(0, len(job_ids), IDS_PER_CALL):
            chunk = job_ids[i:i + IDS_PER_CALL]
            runs.extend(r for r in self._query(["-j", ",".join(chunk)]) if r.job_id in chunk)
        contexts = self._contexts(runs, self._output_files(None) if runs else {})
        return [c for c in contexts if c.end is not None and start <= c.end < end]

    # --- sacct / scontrol calls -----------------------------------------------------------------------------------

    def _query(self, selection: list[str]) -> list[JobRun]:
        """The runs (with steps) that `sacct SELECTION` lists, in the configured format."""
        if not self.settings.json:
            return self._query_text(selection)
        runs, trusted = parse_json(self._call([self.settings.sacct, *self._common(), "--json", *selection], "sacct"))
        return runs if trusted else merge_exit_codes(runs, self._query_text(selection))

    def _query_text(self, selection: list[str]) -> list[JobRun]:
        fields = [*FIELDS, *(f for f in OUTPUT_FIELDS if f.lower() in self._fields())]
        command = [self.settings.sacct, *self._common(), "--parsable2", f"--format={','.join(fields)}", *selection]
        return parse_parsable(self._call(command, "sacct"))

    def _common(self) -> list[str]:
        # every user's jobs (root and operators see them all), every run of a requeued job
        return ["--allusers", "--duplicates", *(["-M", self.settings.cluster] if self.settings.cluster else [])]

    def _fields(self) -> set[str]:
        if self._offered_fields is None:
            text = self._call([self.settings.sacct, "--helpformat"], "sacct")
            self._offered_fields = {f.lower() for f in text.split()}
        return self._offered_fields

    def _output_files(self, job: str | None) -> dict[str, tuple[str, str]]:
        """(StdOut, StdErr) by raw job id from `scontrol show job` (all jobs the controller holds when `job` is
        None). The controller forgets finished jobs after MinJobAge: then there is nothing, and that is no error."""
        command = [self.settings.scontrol, "--oneliner", *(["-M", self.settings.cluster] if self.settings.cluster else []),
                   "show", "job", *([job] if job else [])]
        try:
            text = self._call(command, "scontrol")
        except SlurmError:
            return {}
        # salloc/srun-only jobs have no batch output: `StdOut=(null)` or nothing
        return {raw: (_text(f.get("StdOut", "")), _text(f.get("StdErr", ""))) for raw, f in parse_scontrol(text).items()}

    def _call(self, command: list[str], setting: str) -> str:
        shown = " ".join(command[:4]) + (" …" if len(command) > 4 else "")
        env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.settings.timeout_s, env=env, check=False)
        except FileNotFoundError:
            raise SlurmError(f"{command[0]!r} not found (install the Slurm client or set [slurm] {setting} to its path)") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"`{shown}` gave no answer within {self.settings.timeout_s:g} s ([slurm] timeout_s)") from None
        except OSError as e:
            raise SlurmError(f"cannot run {command[0]!r}: {e}") from None
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            raise SlurmError(f"`{shown}` failed (exit {done.returncode}): {lines[-1] if lines else 'no message'}")
        return done.stdout

    # --- attempts -------------------------------------------------------------------------------------------------

    def _contexts(self, runs: Iterable[JobRun], output_files: dict[str, tuple[str, str]]) -> list[AttemptContext]:
        by_workload: dict[str, list[JobRun]] = {}
        for run in runs:
            by_workload.setdefault(run.job_id, []).append(run)
        contexts = []
        for job_id in sorted(by_workload, key=_natural):
            # a run that never started (cancelled while pending) is no attempt; equal start seconds keep sacct's order
            started = sorted((r for r in by_workload[job_id] if r.start is not None and r.nodes), key=lambda r: r.start)
            contexts.extend(self._context(run, attempt, output_files.get(run.job_id_raw)) for attempt, run in enumerate(started))
        return contexts

    def _context(self, run: JobRun, attempt: int, controller_files: tuple[str, str] | None) -> AttemptContext:
        settings = self.settings
        cluster = run.cluster or settings.cluster or "slurm"
        gpus, gpu_model = gpus_from_tres(run.tres)
        stdout, stderr, found_by = _output_paths(run, controller_files)
        logs = [LogSpec(source="applog", path=p) for p in dict.fromkeys(p for p in (stdout, stderr) if p)]
        values = {"job_id": run.job_id, "job_id_raw": run.job_id_raw, "job_name": run.name, "cluster": cluster,
                  "user": run.user, "attempt": str(attempt), "workdir": run.workdir}
        logs += [LogSpec(source=source, path=fill_template(template, values)) for source, template in sorted(settings.logs.items())]
        main = main_step(run.steps)
        scheduler = {
            "name": "slurm", "ref": f"{run.job_id}:{attempt}", "job_id_raw": run.job_id_raw, "job_name": run.name,
            "user": run.user, "partition": run.partition, "state": run.state_text, "reason": run.reason,
            "derived_exit_code": run.derived_exit_code, "submit": _iso(run.submit), "gpus": gpus or None,
            "tres": ",".join(f"{k}={v}" for k, v in sorted(run.tres.items())),
            "step": main.step_id if main else None, "step_state": main.state if main else None,
            "step_exit_code": main.exit_code if main else None,
            "steps": [{"id": s.step_id, "name": s.name, "state": s.state, "exit_code": s.exit_code} for s in run.steps],
            "stdout": stdout, "stderr": stderr, "output_files_from": found_by,
        }
        return AttemptContext(
            workload_id=run.job_id, attempt=attempt, cluster=cluster,
            start=run.start, end=run.end, nodes=run.nodes, state=run.state or None, exit_code=run.exit_code,
            timezone=settings.timezone, gpu_model=gpu_model or settings.gpu_model or None,
            gpus_per_node=max(1, gpus // len(run.nodes)) if gpus else settings.gpus_per_node,
            logs=tuple(logs), scheduler={k: v for k, v in scheduler.items() if v not in (None, "", [])},
        )


def from_config(config: Config) -> SlurmConnector | None:
    """The connector when `[slurm] enabled = true`; BadInput for settings it cannot work with."""
    settings = config.slurm
    if not settings.enabled:
        return None
    if settings.timeout_s <= 0:
        raise BadInput("firstfault.toml", "slurm.timeout_s", "must be > 0")
    if settings.gpus_per_node < 1:
        raise BadInput("firstfault.toml", "slurm.gpus_per_node", "must be >= 1")
    try:
        ZoneInfo(settings.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadInput("firstfault.toml", "slurm.timezone", f"unknown time zone {settings.timezone!r}") from None
    for source, template in settings.logs.items():
        if not isinstance(template, str) or not template.strip():
            raise BadInput("firstfault.toml", f"slurm.logs.{source}", "must be a path template (a string)")
        unknown = sorted(set(re.findall(r"\{(\w+)\}", template)) - set(TEMPLATE_PLACEHOLDERS))
        if unknown:
            raise BadInput("firstfault.toml", f"slurm.logs.{source}",
                           f"unknown placeholder {{{unknown[0]}}} (known: {', '.join('{' + p + '}' for p in TEMPLATE_PLACEHOLDERS)})")
    return SlurmConnector(settings)


# --- helpers -------------------------------------------------------------------------------------------------------

def gpus_from_tres(tres: dict[str, str]) -> tuple[int, str | None]:
    """(GPU count, model) from allocated TRES: `gres/gpu=8`, `gres/gpu:h100=8` -> (8, "H100"). Several GPU types in
    one job name no single model."""
    typed = {key.split(":", 1)[1]: _int(value) for key, value in tres.items() if key.startswith("gres/gpu:")}
    count = _int(tres["gres/gpu"]) if "gres/gpu" in tres else sum(typed.values())
    model = next(iter(typed)).upper() if len(typed) == 1 else None
    return count, model


def main_step(steps: Sequence[Step]) -> Step | None:
    """The step that says how the work went: the first srun step (`.0`, `.1`, …) that did not complete, else the
    first srun step, else the batch step."""
    numbered = sorted((s for s in steps if re.match(r"\d+", s.step_id)), key=lambda s: _natural(s.step_id))
    failed = [s for s in numbered if s.state != "COMPLETED"]
    if failed or numbered:
        return (failed or numbered)[0]
    return next((s for s in steps if s.step_id == "batch"), None)


def fill_template(template: str, values: dict[str, str]) -> str:
    """`{job_id}`-style placeholders replaced; `{node}` is kept for the static context to expand per node."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def _output_paths(run: JobRun, controller_files: tuple[str, str] | None) -> tuple[str, str, str]:
    """(stdout, stderr, where they came from), absolute where the work dir is known."""
    if run.stdout or run.stderr:
        out, err, found_by = expand_output_pattern(run.stdout, run), expand_output_pattern(run.stderr, run), "sacct"
    elif controller_files and any(controller_files):
        (out, err), found_by = controller_files, "scontrol"
    else:
        # Slurm's own default when the job named no file; only taken when the file is there
        default = os.path.join(run.workdir, expand_output_pattern("slurm-%A_%a.out" if run.array_ids else "slurm-%j.out", run))
        if not run.workdir or not os.path.isfile(default):
            return "", "", ""
        out, err, found_by = default, default, "default"
    return _under(out, run.workdir), _under(err, run.workdir), found_by


def _under(path: str, workdir: str) -> str:
    """Relative output paths are relative to the job's work dir (where slurmstepd opened them)."""
    return path if not path or os.path.isabs(path) or not workdir else os.path.join(workdir, path)


def _belongs_to(run: JobRun, job: str) -> bool:
    """`sacct -j 123` lists array tasks 123_N and het components 123+N too; `-j` of a raw id names one run."""
    return run.job_id == job or run.job_id_raw == job or run.job_id.startswith((f"{job}_", f"{job}+"))


def _numbered(runs: Iterable[JobRun]) -> Iterable[tuple[tuple[str, int], JobRun]]:
    seen: dict[str, int] = {}
    for run in runs:
        n = seen.get(run.job_id_raw, 0)
        seen[run.job_id_raw] = n + 1
        yield (run.job_id_raw, n), run


def _run_from_json(job: dict) -> JobRun:
    job_id_raw = str(job.get("job_id", ""))
    array, het = job.get("array") or {}, job.get("het") or {}
    task, offset = _number(array.get("task_id")), _number(het.get("job_offset"))
    if _number(array.get("job_id")) and task is not None:
        job_id = f"{_number(array['job_id'])}_{task}"
    elif _number(het.get("job_id")) and offset is not None:
        job_id = f"{_number(het['job_id'])}+{offset}"
    else:
        job_id = job_id_raw
    state = job.get("state") or {}
    state_words = _words(state.get("current") if isinstance(state, dict) else state)
    times = job.get("time") or {}
    steps = []
    for s in job.get("steps") or []:
        step = s.get("step") or {}
        step_id = str(step.get("id", ""))
        if "." in step_id:  # 23.11+: "560.0"
            step_id = step_id.split(".", 1)[1]
        steps.append(Step(step_id, str(step.get("name") or ""), _base_state(" ".join(_words(s.get("state")))), _exit_json(s.get("exit_code"))))
    tres = {}
    for entry in ((job.get("tres") or {}).get("allocated") or []):
        count = _number(entry.get("count"))
        if count is not None and entry.get("type"):
            tres[entry["type"] + (f"/{entry['name']}" if entry.get("name") else "")] = str(count)
    return JobRun(
        job_id=job_id, job_id_raw=job_id_raw, name=str(job.get("name") or ""), cluster=str(job.get("cluster") or ""),
        user=str(job.get("user") or ""), partition=str(job.get("partition") or ""),
        state=_base_state(" ".join(state_words)), state_text=" ".join(state_words),
        exit_code=_exit_json(job.get("exit_code")), derived_exit_code=_exit_json(job.get("derived_exit_code")),
        reason=_text(str(state.get("reason") or "") if isinstance(state, dict) else ""),
        submit=_time_json(times.get("submission")), start=_time_json(times.get("start")), end=_time_json(times.get("end")),
        nodes=_nodes(str(job.get("nodes") or ""), job_id), tres=tres, workdir=str(job.get("working_directory") or ""),
        # 24.05+ also gives the expanded paths
        stdout=str(job.get("stdout_expanded") or job.get("stdout") or ""),
        stderr=str(job.get("stderr_expanded") or job.get("stderr") or ""),
        steps=tuple(steps),
    )


def _data_parser_version(meta: dict) -> tuple[int, ...]:
    """(0, 0, 40) from `data_parser/v0.0.40`; the 21.08-22.05 `openapi/dbv0.0.3x` plugins are (0, 0, 3x)."""
    plugin = meta.get("plugin") or {}
    text = str(plugin.get("data_parser") or plugin.get("type") or "")
    m = re.search(r"v(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(g) for g in m.groups()) if m else (0, 0, 0)


def _number(value) -> int | None:
    """A plain integer or a `{set, infinite, number}` wrapper (unset or infinite: None)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _words(value) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _base_state(text: str) -> str:
    """`CANCELLED by 0` -> CANCELLED; of a 23.11+ list of state words the first that is a base state."""
    words = text.split()
    return next((w for w in words if w in BASE_STATES), words[0] if words else "")


def _exit_text(value: str) -> str | None:
    value = value.strip()
    return value if re.fullmatch(r"\d+:\d+", value) else None


def _exit_json(value) -> str | None:
    """`status:signal` from {status, return_code, signal: {signal_id | id, name}} (either shape)."""
    if not isinstance(value, dict):
        return None
    signal = value.get("signal") or {}
    code = _number(value.get("return_code")) or 0
    sig = _number(signal.get("id", signal.get("signal_id"))) or 0
    return f"{code}:{sig}"


def _time_text(value: str) -> datetime | None:
    value = value.strip()
    if not value or value in ("Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=timezone.utc)  # TZ=UTC: what sacct printed is UTC
    except ValueError:
        raise SlurmError(f"sacct printed a time that is not ISO 8601: {value!r} (is SLURM_TIME_FORMAT set?)") from None


def _time_json(value) -> datetime | None:
    seconds = _number(value)
    return datetime.fromtimestamp(seconds, timezone.utc) if seconds else None


def _nodes(expression: str, job_id: str) -> tuple[str, ...]:
    expression = expression.strip()
    if not expression or expression in ("None assigned", "(null)"):
        return ()
    try:
        return tuple(expand_hostlist(expression))
    except ValueError as e:
        raise SlurmError(f"job {job_id}: {e}") from None


def _tres_text(value: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in value.split(",") if "=" in part)


def _text(value: str) -> str:
    value = value.strip()
    return "" if value in ("None", "(null)") else value


def _int(value: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _natural(text: str) -> tuple:
    """123_10 after 123_9."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def _sacct_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")
