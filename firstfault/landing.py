"""Land one attempt: raw sources -> normalised Parquet in the lake, and its events, in one pass per batch.

Each batch of a log file is split into lines, stripped of decorations, stamped in UTC, placed on a node/rank and
written to `logs`; in the same pass the few lines that contain an extraction trigger are kept aside, and once all
files are read the events are extracted from those candidates in one vectorized step (so multi-line blocks that
straddle batches are still assembled) and written to `events`. Progress markers (iteration and checkpoint lines)
are summarised batch by batch into `progress` instead (transforms/progress_summary.py).
"""
from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import polars as pl
import pyarrow as pa

from firstfault.config import LandingSettings
from firstfault.connectors.base import Report, SourceConnector, Staging
from firstfault.connectors.flight_recorder import read_dumps
from firstfault.connectors.local_files import (
    FilePart,
    GlobLimits,
    LogFile,
    plain_size,
    split_file,
    fingerprint,
    read_batches,
    resolve_logs,
    resolve_paths,
)
from firstfault.connectors.metrics_csv import read_metrics
from firstfault.connectors.static_context import AttemptContext, context_from_dict
from firstfault import stages
from firstfault.lake import Lake, new_generation
from firstfault.stages import stage
from firstfault.workers import process_pool
from firstfault.schema import (
    CONNECTOR_REPORT_SCHEMA,
    PROGRESS_SCHEMA,
    CONTEXT_SCHEMA,
    EVENTS_ARROW_SCHEMA,
    FLIGHT_RECORDER_SCHEMA,
    LINE_SCHEMA,
    LOGS_SCHEMA,
    METRICS_SCHEMA,
    conform_events,
)
from firstfault.spill import SpillingFrames
from firstfault.transforms.extract import (
    Pattern,
    extract_events,
    first_match,
    load_patterns,
    trigger_literals,
)
from firstfault.transforms.attempt_context import context_table, logged_gpu_models
from firstfault.transforms.fixed_formats import detect_format, sample_lines
from firstfault.transforms.flight_recorder_events import flight_recorder_events
from firstfault.transforms.lines import LineStats, is_binary_file, split_chunks
from firstfault.transforms.metric_events import metric_events
from firstfault.transforms.multiline import MULTILINE_TRIGGERS, or_entry_header
from firstfault.transforms.normalize import normalize_lines
from firstfault.transforms.progress_summary import PROGRESS_KIND, ProgressSummary, add_markers
from firstfault.transforms.peers import resolve_attempt_peers, resolve_peers
from firstfault.transforms.timestamps import FileClock, anchor_files

log = logging.getLogger(__name__)

CANDIDATE_COLUMNS = list(LINE_SCHEMA)
_PIECES_PER_UNIT = 4
# An attempt's candidate lines beyond this go to a temporary file until extraction (firstfault/spill.py).
_CANDIDATES_IN_MEMORY = 8 << 20
# Attempts landed together are extracted together (one plan for many small attempts) up to this much candidate text.
_EXTRACT_GROUP_BYTES = 32 << 20


@dataclass
class LandingResult:
    attempt_id: str
    log_rows: int = 0
    event_rows: int = 0
    metric_rows: int = 0
    reports: list[dict] = field(default_factory=list)
    # its tables other than `logs` (what the rule pass reads) as written, when the landing was asked to keep them
    tables: dict[str, pa.Table] = field(default_factory=dict)


def land_attempt(ctx: AttemptContext, lake: Lake, patterns: list[Pattern], settings: LandingSettings = LandingSettings(),
                 sources: Sequence[SourceConnector] = ()) -> LandingResult:
    return land_attempts([ctx], lake, patterns, settings, sources)[0]


@dataclass
class _LogsLanded:
    """One attempt between its two landing phases: logs written, candidate lines kept for extraction."""
    ctx: AttemptContext
    generation: str  # of the lake files this landing writes (firstfault/lake.py)
    result: LandingResult
    files: list[LogFile]
    candidates: SpillingFrames
    progress: ProgressSummary = field(default_factory=ProgressSummary)
    events: pl.DataFrame | None = None  # extracted from the candidates, peers resolved
    gpu_model: str | None = None  # the model its logs name most

    def take_events(self) -> pl.DataFrame:
        """The extracted events, handed over once, so that a big attempt's events are not held twice while its
        final events table is built."""
        events, self.events = self.events, None
        return events


def land_attempts(ctxs: Sequence[AttemptContext], lake: Lake, patterns: list[Pattern], settings: LandingSettings = LandingSettings(),
                  sources: Sequence[SourceConnector] = (),
                  on_error: Callable[[AttemptContext, Exception], None] | None = None, part_workers: int = 1,
                  keep_bytes: int = 0) -> list[LandingResult]:
    """Land several attempts: the logs of all of them in one pass (a normalisation plan costs ~40 ms to run
    whatever its size, so units of lines span attempts), then the events of all of them in one extraction, then
    the rest of each attempt. With `part_workers` > 1, big application logs are cut into parts landed by that many
    processes (`[landing] part_bytes`). Each attempt's files are written as a new generation that becomes readable,
    and replaces the earlier one, only once all of them are written (`Lake.commit`). An attempt that fails is
    handed to `on_error` and left out of the results, its earlier landing still readable; without `on_error` the
    error propagates. With `keep_bytes` > 0 each result also holds the rule pass's input tables it wrote
    (`tables`), as long as those of all of them stay within that many bytes; beyond it none does (bounded memory:
    the rule pass then reads the lake)."""
    generation = new_generation()

    def isolate(ctx: AttemptContext, step: Callable[[], Any]) -> Any:
        try:
            return step()
        except Exception as e:  # noqa: BLE001 - one attempt's corrupt input never sinks the others
            lake.discard(ctx.day, ctx.attempt_key, generation)  # what the failed landing wrote; the earlier one stays
            if on_error is None:
                raise
            on_error(ctx, e)
            return None

    scan = _Scan.of(patterns)
    resolved = [x for ctx in ctxs if (x := isolate(ctx, lambda: _resolve(ctx, generation, lake, sources, settings))) is not None]
    landed = _land_logs_together(resolved, lake, scan, settings, isolate, part_workers)
    results, kept = [], 0
    for group in _extraction_groups(landed):
        _extract_together(group, scan, isolate)
        for item in group:  # written now: a group's events are not held while the next group is extracted
            if item.events is not None and isolate(item.ctx, lambda: _land_rest(item, lake, settings, keep=kept < keep_bytes)):
                results.append(item.result)
                kept += sum(t.nbytes for t in item.result.tables.values()) if item.result.tables else keep_bytes + 1
    if kept > keep_bytes:  # one attempt's were not kept, or all of them are too big: the rule pass reads the lake
        for r in results:
            r.tables = {}
    return results


def _extraction_groups(landed: list[_LogsLanded]) -> Iterator[list[_LogsLanded]]:
    """Consecutive attempts whose candidate lines together stay within _EXTRACT_GROUP_BYTES (an attempt above it
    is a group alone): extraction holds a group's candidates and events at once, so landing many attempts together
    does not hold all of theirs."""
    group: list[_LogsLanded] = []
    size = 0
    for item in landed:
        if group and size + item.candidates.added_bytes > _EXTRACT_GROUP_BYTES:
            yield group
            group, size = [], 0
        group.append(item)
        size += item.candidates.added_bytes
    if group:
        yield group


def _resolve(ctx: AttemptContext, generation: str, lake: Lake, sources, settings: LandingSettings) -> _LogsLanded:
    """Stage the attempt's remote sources and find its log files; report what is missing or cannot be read."""
    result = LandingResult(ctx.attempt_id)
    ctx = _stage_sources(ctx, lake, sources, result)
    files, missing = resolve_logs(ctx, _glob_limits(settings))
    for m in missing:
        result.reports.append(_report(ctx, "local_files", m.source, m.pattern, m.status, 0, m.reason))
    return _LogsLanded(ctx, generation, result, files, SpillingFrames(LINE_SCHEMA, _CANDIDATES_IN_MEMORY))


@dataclass(frozen=True)
class _Scan:
    """What the landing pass looks for in every line: the triggers of the event patterns (candidate lines, kept for
    extraction) and those of the progress patterns (markers, summarised as they come)."""
    event_patterns: list[Pattern]
    progress_patterns: list[Pattern]
    candidate_regex: str
    progress_regex: str

    @classmethod
    def of(cls, patterns: list[Pattern]) -> "_Scan":
        progress = [p for p in patterns if p.kind == PROGRESS_KIND]
        events = [p for p in patterns if p.kind != PROGRESS_KIND]
        return cls(events, progress, _literal_alternation(set(trigger_literals(events)) | set(MULTILINE_TRIGGERS)),
                   _literal_alternation(trigger_literals(progress)) or "$^")

    def markers(self, lines: pl.DataFrame) -> pl.DataFrame:
        """The lines (of those that hold a progress trigger) a progress pattern matches, with their `iteration`."""
        return first_match(lines, self.progress_patterns, "iteration")

    def marker_events(self, lines: pl.DataFrame) -> pl.DataFrame:
        """The progress events of marker lines."""
        return extract_events(lines.lazy(), self.progress_patterns, assemblers=[], multiline_triggers=[]).collect()


def _land_logs_together(items: list[_LogsLanded], lake: Lake, scan: _Scan, settings: LandingSettings, isolate,
                        part_workers: int) -> list[_LogsLanded]:
    """The `logs` of every attempt in one pass; when it fails, each attempt is landed alone, so only the attempt
    that breaks it fails."""
    if len(items) > 1:
        try:
            _land_logs(items, lake, scan, settings, part_workers)
            return items
        except Exception:  # noqa: BLE001 - find the attempt that breaks it below
            for item in items:  # the joint pass may have written some files of each
                _discard_logs(item, lake)
    return [item for item in items if isolate(item.ctx, lambda: _land_logs([item], lake, scan, settings, part_workers) or True)]


def _discard_logs(item: _LogsLanded, lake: Lake) -> None:
    """The `logs` files this landing wrote of the attempt, before it lands them again."""
    lake.discard(item.ctx.day, item.ctx.attempt_key, item.generation, tables=("logs",))


@dataclass
class _FilesLanded:
    """What one pass over files of the attempts gathered, per attempt (its position)."""
    candidates: list[SpillingFrames]
    summaries: list[ProgressSummary]
    reports: list[list[dict]]
    rows: list[int]
    clock_free: bool = True  # no line needed a boot time: the file's parts do not depend on each other's clocks


# stamps that need more of the file than the line before: a boot time (inferred from other lines) or a chain
_CLOCK_QUALITIES = ["boot_anchored", "monotonic"]


def _land_logs(items: list[_LogsLanded], lake: Lake, scan: _Scan, settings: LandingSettings, part_workers: int = 1) -> None:
    """Write each attempt's `logs` partition, keep its candidate lines, summarise its progress markers and report
    each of its files; the parts of big files are landed by other processes meanwhile. Nothing of an item changes
    unless the whole pass succeeds (a failed joint pass is retried attempt by attempt)."""
    files = [(position, index, log_file) for position, item in enumerate(items) for index, log_file in enumerate(item.files)]
    parts = _file_parts(files, settings, part_workers)
    files = [(p, i, replace(f, part=parts[g][0]) if g in parts else f) for g, (p, i, f) in enumerate(files)]
    writers: dict[int, Any] = {}

    def writer(position: int):
        if position not in writers:
            item = items[position]
            writers[position] = lake.partition_writer("logs", item.ctx.day, item.ctx.attempt_key, LOGS_SCHEMA, item.generation)
        return writers[position]

    with process_pool(max(part_workers - 1, 1)) if parts else nullcontext() as pool:
        pending = [(g, pool.submit(_land_part, items[position].ctx, items[position].generation, index, replace(log_file, part=part),
                                   scan, settings, lake, f"{index}-{k}"))
                   for g, (position, index, log_file) in enumerate(files) if g in parts for k, part in enumerate(parts[g][1:], 1)]
        try:
            landed = _land_files(items, files, scan, settings, writer)
        finally:
            for w in writers.values():
                w.close()
        part_results = [(g, future.result()) for g, future in pending]
    if not all(r.clock_free for _, r in part_results):  # the parts' clocks depend on each other: land the files whole
        for item in items:
            _discard_logs(item, lake)
        return _land_logs(items, lake, scan, settings)
    for g, part in part_results:
        _add_part(landed, files[g][0], files[g][2].uri, part)
    for position, item in enumerate(items):
        item.result.reports.extend(landed.reports[position])
        item.result.log_rows = landed.rows[position]
        item.candidates = landed.candidates[position]
        item.progress = landed.summaries[position]


def _file_parts(files: list[tuple[int, int, LogFile]], settings: LandingSettings, part_workers: int) -> dict[int, list[FilePart]]:
    """The parts of each file worth landing in parts: a plain application log (srun format: every line stamped, no
    boot clock) bigger than `part_bytes`, cut for the `part_workers` processes."""
    parts = {}
    for g, (_, _, log_file) in enumerate(files):
        size = plain_size(log_file.uri) if part_workers > 1 else None
        if size is None or size <= settings.part_bytes:
            continue
        head = next(read_batches(log_file.uri, 1 << 16, settings.max_line_bytes), (b"", 1, 0))[0]
        if detect_format(sample_lines(head)) == "srun":
            parts[g] = split_file(log_file.uri, min(part_workers, -(-size // settings.part_bytes)))
    return parts


def _land_part(ctx: AttemptContext, generation: str, index: int, log_file: LogFile, scan: _Scan, settings: LandingSettings,
               lake: Lake, piece: str) -> _FilesLanded:
    """One part of a big file, in a process of its own: its clock starts where the lines before it end, its `logs`
    rows go to files of their own (`piece`) in the attempt's partition; its candidate lines come back as frames."""
    last_ts, clock_free = _clock_before(ctx, index, log_file, scan, settings)
    log_file = replace(log_file, part=replace(log_file.part, last_ts=last_ts))
    item = _LogsLanded(ctx, generation, LandingResult(ctx.attempt_id), [log_file], SpillingFrames(LINE_SCHEMA, _CANDIDATES_IN_MEMORY))
    writer = lake.partition_writer("logs", ctx.day, ctx.attempt_key, LOGS_SCHEMA, generation, piece)
    try:
        landed = _land_files([item], [(0, index, log_file)], scan, settings, lambda _: writer)
    finally:
        writer.close()
    landed.candidates = [landed.candidates[0].frames()]  # a spill file does not cross processes
    landed.clock_free &= clock_free
    return landed


_LEAD_IN_BYTES = 1 << 20


def _clock_before(ctx: AttemptContext, index: int, log_file: LogFile, scan: _Scan, settings: LandingSettings) -> tuple[datetime | None, bool]:
    """The last stamp of the file's lines before its part (read back from the part's start until a line has one),
    and whether those lines needed no boot clock."""
    start, lead = log_file.part.start, _LEAD_IN_BYTES
    while True:
        begin = max(start - lead, 0)
        chunks = [c for c, _, _ in read_batches(log_file.uri, settings.batch_bytes, settings.max_line_bytes, part=FilePart(begin, start, 1))]
        if begin and chunks:
            chunks[0] = chunks[0][chunks[0].find(b"\n") + 1:]  # from the first whole line
        pieces = [_Piece(0, log_file, c) for c in chunks if c]
        frame, _ = _split_and_normalize([ctx], [(0, index, log_file)], pieces, scan, settings) if pieces else (pl.DataFrame(), None)
        if frame.height:
            frame, clocks = anchor_files(frame, {0: FileClock(boot_time=dict(ctx.boot_times).get(log_file.node))})
            if clocks[0].last_ts is not None or not begin:
                return clocks[0].last_ts, not frame.get_column("ts_quality").is_in(_CLOCK_QUALITIES).any()
        elif not begin:
            return None, True
        lead *= 4


def _add_part(landed: _FilesLanded, position: int, uri: str, part: _FilesLanded) -> None:
    """A part's candidates, progress, rows and line counts added to its attempt's (its file's report)."""
    for frame in part.candidates[0]:
        landed.candidates[position].add(frame)
    landed.summaries[position].merge(part.summaries[0])
    landed.rows[position] += part.rows[0]
    report = next(r for r in landed.reports[position] if r["uri"] == uri)
    for key in ("rows", "lines_malformed", "lines_binary", "lines_truncated", "lines_skipped"):
        report[key] += part.reports[0][0][key]
    if report["status"] == "ok":
        report["reason"] = _line_notes(report["lines_malformed"], report["lines_binary"], report["lines_truncated"],
                                       report["lines_skipped"])
    if part.reports[0][0]["status"] == "error" and report["status"] != "error":
        report["status"], report["reason"] = "error", part.reports[0][0]["reason"]


def _land_files(items: list[_LogsLanded], files: list[tuple[int, int, LogFile]], scan: _Scan, settings: LandingSettings,
                writer: Callable[[int], Any]) -> _FilesLanded:
    """The pass over `files` (position of the attempt, index of the file in it, file): each unit's lines written to
    `writer(position)`, candidates kept, markers summarised, a report per file."""
    last_file = {position: g for g, (position, _, _) in enumerate(files)}  # each attempt's last file (global index)
    landed = _FilesLanded([SpillingFrames(LINE_SCHEMA, _CANDIDATES_IN_MEMORY) for _ in items], [ProgressSummary() for _ in items],
                          [[] for _ in items], [0] * len(items))
    candidates, summaries, reports, rows = landed.candidates, landed.summaries, landed.reports, landed.rows
    attempt_ids = [item.ctx.attempt_id for item in items]
    for frame, file_rows, closed in _landed_units(items, files, scan, settings, reports):
        if frame.height:
            landed.clock_free &= not frame.get_column("ts_quality").is_in(_CLOCK_QUALITIES).any()
            frame = frame.with_columns(attempt_id=pl.col("_attempt").replace_strict(range(len(items)), attempt_ids, return_dtype=pl.String))
            with stage("progress"):  # the markers of every attempt in the unit at once: a plan per attempt costs ~20 ms
                add_markers(summaries, scan.markers(frame.filter(pl.col("_progress")).select(*CANDIDATE_COLUMNS, "_attempt")), "_attempt")
            for (position,), part in frame.partition_by("_attempt", as_dict=True, maintain_order=True).items():
                candidates[position].add(_owning_strings(part.filter(pl.col("_candidate")).select(CANDIDATE_COLUMNS)))
                with stage("parquet"):
                    for batch in part.select(LOGS_SCHEMA.names).to_arrow().cast(LOGS_SCHEMA).to_batches():
                        writer(position).write(batch)
        for g, n in file_rows.items():
            rows[files[g][0]] += n
        for g in closed:
            position = files[g][0]
            if last_file[position] == g:
                writer(position).close()
    for position in range(len(items)):
        writer(position).close()
    return landed


def _extract_together(landed: list[_LogsLanded], scan: _Scan, isolate) -> None:
    """Single-line and multi-line events of every attempt's candidate lines, and the progress events of each rank's
    first and last marker, into each attempt's `events`; its candidates are dropped once extracted. When the joint
    pass fails, each attempt is extracted alone, so only the attempt that breaks it fails (and is left without
    events)."""
    def extract(items: list[_LogsLanded]) -> None:
        # each attempt's in file and line order (the parts of a big file come back after the rest)
        frames = [pl.concat(item.candidates.frames(), how="vertical_relaxed").sort("file_index", "line", maintain_order=True)
                  for item in items if item.candidates.frames()]
        lines = pl.concat(frames, how="vertical_relaxed").lazy() if frames else pl.LazyFrame(schema=LINE_SCHEMA)
        attempts = {item.ctx.attempt_id: (item.ctx.nodes, item.ctx.addresses) for item in items}
        edges = [e.select(CANDIDATE_COLUMNS) for item in items if (e := item.progress.edge_lines()) is not None]
        with stage("extract"):
            events = resolve_attempt_peers(extract_events(lines, scan.event_patterns).collect(), attempts)
            if edges:
                events = pl.concat([events, scan.marker_events(pl.concat(edges, how="vertical_relaxed"))], how="vertical_relaxed")
        by_attempt = events.partition_by("attempt_id", as_dict=True, include_key=True) if events.height else {}
        models = logged_gpu_models(events)
        for item in items:
            item.events = by_attempt.get((item.ctx.attempt_id,), events.clear())
            item.gpu_model = models.get(item.ctx.attempt_id)
            item.candidates = SpillingFrames(LINE_SCHEMA, _CANDIDATES_IN_MEMORY)

    if len(landed) > 1:
        try:
            extract(landed)
            return
        except Exception:  # noqa: BLE001 - find the attempt that breaks it below
            pass
    for item in landed:
        isolate(item.ctx, lambda: extract([item]))


def _glob_limits(settings: LandingSettings) -> GlobLimits:
    return GlobLimits(settings.max_glob_files, settings.glob_seconds)


def _land_rest(item: _LogsLanded, lake: Lake, settings: LandingSettings, keep: bool = False) -> bool:
    """The attempt's tables other than `logs`, written and committed; with `keep` they stay on its result too, unless
    its events are more than one batch (held whole, they would be copied twice)."""
    ctx, result, files = item.ctx, item.result, item.files
    metrics = _land_metrics(ctx, result, _glob_limits(settings))
    events = _events(item.take_events(), metrics, {f.uri: f.origin for f in files if f.origin})
    fr_entries, fr_events = _land_flight_recorder(ctx, result, len(files), _glob_limits(settings))
    day, key, generation = ctx.day, ctx.attempt_key, item.generation
    event_batches = _event_batches(events, fr_events, EVENTS_ARROW_SCHEMA)
    keep = keep and events.height + fr_events.height <= _EVENT_ROWS_PER_BATCH
    tables = {
        "events": pa.Table.from_batches(list(event_batches), EVENTS_ARROW_SCHEMA) if keep else event_batches,
        "progress": item.progress.table().to_arrow().cast(PROGRESS_SCHEMA),
        "flight_recorder": fr_entries,
        "metrics": metrics,
        "context": context_table(ctx, logged_gpu_model=item.gpu_model),
        "connector_reports": pa.Table.from_pylist(result.reports, CONNECTOR_REPORT_SCHEMA),
    }
    schemas = {"events": EVENTS_ARROW_SCHEMA, "progress": PROGRESS_SCHEMA, "context": CONTEXT_SCHEMA,
               "connector_reports": CONNECTOR_REPORT_SCHEMA, "flight_recorder": fr_entries.schema, "metrics": metrics.schema}
    with stage("parquet"):
        rows = {name: lake.write(name, day, key, table, schemas[name], generation) for name, table in tables.items()}
        lake.commit(day, key, generation)  # readable now, and the earlier landing's files go
    result.event_rows, result.metric_rows = rows["events"], rows["metrics"]
    result.tables = tables if keep else {}
    return True


def _stage_sources(ctx: AttemptContext, lake: Lake, sources: Sequence[SourceConnector], result: LandingResult) -> AttemptContext:
    """Fetch remote logs and metrics into the lake's staging area; a connector that fails is reported, never fatal."""
    staging = Staging(lake, ctx)
    for connector in sources:
        if not connector.applies(ctx):
            continue
        staging.reset(connector.name)
        try:
            reports = connector.stage(ctx, staging)
        except Exception as e:  # a plug-in's bug must not sink the attempt either
            log.warning("connector %s failed for %s: %s", connector.name, ctx.attempt_id, e)
            reports = [Report(connector.name, connector.name, "", "error", 0, f"{type(e).__name__}: {e}")]
        for r in reports:
            result.reports.append(_report(ctx, r.connector, r.source, r.uri, r.status, r.rows, r.reason))
    return staging.context()


@dataclass
class _Piece:
    """One read of one file: a chunk of whole lines (or the error that ended the file)."""
    index: int
    file: LogFile
    chunk: bytes = b""
    first_line: int = 1
    cut_bytes: int = 0
    lines: int = 0
    first: bool = False
    last: bool = False
    error: str | None = None
    format: str | None = None  # of the file, detected on its first chunk (fixed_formats.py)
    binary: bool = False  # of the file, judged on its first chunk (transforms/lines.py is_binary_file)


@dataclass
class _FileState:
    clock: FileClock
    stats: LineStats = field(default_factory=LineStats)
    rows: int = 0
    skipped: int = 0  # lines not landed: binary junk, or every line of a binary file
    status: str = "ok"
    reason: str | None = None


def _landed_units(items: list[_LogsLanded], files: list[tuple[int, int, LogFile]], scan: _Scan, settings: LandingSettings,
                  reports: list[list[dict]]):
    """The lines of every file, a unit at a time: normalised, stamped with each file's clock, the lines of binary
    or unreadable files left out. Yields (frame, rows landed per file, files that ended in the unit); each file's
    report goes to `reports` of its attempt when it ends. Files are globally indexed across the attempts; each
    keeps its own clock, line numbers and report."""
    ctxs = [item.ctx for item in items]
    states: dict[int, _FileState] = {}
    for unit, (frame, piece_stats) in _normalized_units(ctxs, files, scan, settings):
        kept, closed = [], []
        for position, (piece, stats) in enumerate(zip(unit, piece_stats)):
            attempt, _, log_file = files[piece.index]
            state = states.get(piece.index)
            if state is None:
                state = states[piece.index] = _FileState(FileClock(boot_time=dict(ctxs[attempt].boot_times).get(log_file.node),
                                                                   last_ts=log_file.part.last_ts if log_file.part else None))
            if piece.error is not None:
                if state.status == "ok":
                    state.status, state.reason = "error", piece.error
                    log.warning("cannot read %s: %s", log_file.uri, piece.error)
            elif state.status in ("ok", "skipped"):
                # every line read is counted: landed (rows) or skipped with the file
                state.stats.add(stats)
                if piece.first and piece.binary:
                    state.status, state.reason = "skipped", "binary content, not a text log"
                if state.status == "skipped":
                    state.skipped += stats.lines
                else:
                    state.skipped += stats.junk
                    kept.append(position)
        if frame.height and len(kept) < len(unit):
            frame = frame.filter(pl.col("_piece").is_in(kept))
        file_rows: dict[int, int] = {}
        if frame.height:
            with stage("anchor"):
                frame, clocks = anchor_files(frame, {g: states[g].clock for g in sorted({p.index for p in unit})})
            for g, clock in clocks.items():
                states[g].clock = clock
            counted = frame.get_column("_file").value_counts()
            file_rows = dict(zip(counted.get_column("_file").to_list(), counted.get_column("count").to_list()))
            for g, n in file_rows.items():
                states[g].rows += n
        for piece in unit:
            if piece.last:
                attempt, _, log_file = files[piece.index]
                reports[attempt].append(_file_report(ctxs[attempt], log_file, states.pop(piece.index)))
                closed.append(piece.index)
        yield frame, file_rows, closed


def _owning_strings(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with its strings copied out: the string views of a filtered frame keep the whole batch's buffers
    alive, so kept candidate lines would hold every landed line in memory until extraction."""
    return pl.from_arrow(frame.to_arrow(compat_level=pl.CompatLevel.oldest()))


def _file_report(ctx, log_file: LogFile, state: _FileState) -> dict:
    status, reason = state.status, state.reason
    if status == "ok" and state.rows == 0:
        status, reason = "empty", "no lines"
    stats = state.stats
    if status == "ok":
        reason = _line_notes(stats.malformed, stats.binary, stats.truncated, state.skipped) or reason
    return _report(ctx, "local_files", log_file.source, log_file.uri, status, state.rows, reason, _safe_fingerprint(log_file.uri), stats,
                   state.skipped)


def _line_notes(malformed: int, binary: int, truncated: int, skipped: int) -> str | None:
    notes = [f"{k} lines {v}" for k, v in (("malformed", malformed), ("binary", binary), ("truncated", truncated),
                                            ("skipped", skipped)) if v]
    return "; ".join(notes) or None


def _pieces(files: list[tuple[int, int, LogFile]], settings: LandingSettings):
    """Every file's chunks in order, the first and last of each marked; a file that cannot be read (or turns out
    corrupt, e.g. a truncated .gz) ends with an error piece after what could be read."""
    for index, (_, _, log_file) in enumerate(files):
        previous: _Piece | None = None
        try:
            for chunk, first_line, cut_bytes in read_batches(log_file.uri, _piece_bytes(settings), settings.max_line_bytes,
                                                             _piece_lines(settings), log_file.part):
                if previous is not None:  # its lines: up to this chunk's first (no second count of its newlines)
                    previous.lines = first_line - previous.first_line
                    yield previous
                file_format = detect_format(sample_lines(chunk)) if previous is None else previous.format
                binary = is_binary_file(chunk) if previous is None else previous.binary
                previous = _Piece(index, log_file, chunk, first_line, cut_bytes, first=previous is None, format=file_format,
                                  binary=binary)
        except (OSError, EOFError, ValueError) as e:
            if previous is not None:
                previous.lines = previous.chunk.count(b"\n")
                yield previous
            yield _Piece(index, log_file, last=True, error=f"{type(e).__name__}: {e}")
            continue
        if previous is None:
            yield _Piece(index, log_file, first=True, last=True)
        else:
            previous.lines, previous.last = previous.chunk.count(b"\n"), True
            yield previous


def _piece_bytes(settings: LandingSettings) -> int:
    """Files are read in quarters of a batch, so that units pack to nearly batch_bytes across file ends: the
    working memory of a unit then depends on batch_bytes only, not on how the volume splits into files."""
    return max(settings.batch_bytes // _PIECES_PER_UNIT, 1)


def _piece_lines(settings: LandingSettings) -> int:
    return max(settings.batch_lines // _PIECES_PER_UNIT, 1)


def _units(files: list[tuple[int, int, LogFile]], settings: LandingSettings):
    """Group consecutive pieces into units of at most batch_bytes and batch_lines."""
    unit: list[_Piece] = []
    size = lines = 0
    for piece in _pieces(files, settings):
        if unit and (size + len(piece.chunk) > settings.batch_bytes or lines + piece.lines > settings.batch_lines):
            yield unit
            unit, size, lines = [], 0, 0
        unit.append(piece)
        size += len(piece.chunk)
        lines += piece.lines
    if unit:
        yield unit


def _normalized_units(ctxs: list[AttemptContext], files: list[tuple[int, int, LogFile]], scan: _Scan, settings: LandingSettings):
    """Split and normalise the units, `units_in_flight` at a time: polars releases the GIL, so the next unit is
    prepared on the other core while this one is written. Memory is bounded by the units in flight; one when stage
    CPU is measured (stages.py)."""
    at_once = 1 if stages.ENABLED else max(1, settings.units_in_flight)
    in_flight: deque[tuple[list[_Piece], Future]] = deque()
    with ThreadPoolExecutor(max_workers=at_once) as pool:
        for unit in _units(files, settings):
            in_flight.append((unit, pool.submit(_split_and_normalize, ctxs, files, unit, scan, settings)))
            if len(in_flight) >= at_once:
                unit, future = in_flight.popleft()
                yield unit, future.result()
        while in_flight:
            unit, future = in_flight.popleft()
            yield unit, future.result()


def _split_and_normalize(ctxs: list[AttemptContext], files: list[tuple[int, int, LogFile]], unit: list[_Piece], scan: _Scan,
             settings: LandingSettings) -> tuple[pl.DataFrame, list[LineStats]]:
    """Split the unit's pieces in one pass and normalise their lines in one plan; the line statistics of each piece."""
    readable = [(position, piece) for position, piece in enumerate(unit) if piece.error is None and piece.chunk]
    stats = [LineStats() for _ in unit]
    if not readable:
        return pl.DataFrame(), stats
    with stage("split"):
        lines, chunk_stats = split_chunks([p.chunk for _, p in readable], [p.first_line for _, p in readable], settings.max_line_bytes)
    for (position, piece), piece_stats in zip(readable, chunk_stats):
        piece_stats.truncated += bool(piece.cut_bytes) and not piece_stats.truncated
        stats[position] = piece_stats
    frame = lines.join(_file_columns(files, readable), on="_chunk", how="left", maintain_order="left").drop("_chunk")
    with stage("parse"):
        frame = normalize_lines(ctxs, frame)
    with stage("scan"):
        return frame.with_columns(_candidate=or_entry_header(pl.col("msg").str.contains(scan.candidate_regex)),
                                  _progress=pl.col("msg").str.contains(scan.progress_regex)), stats


def _literal_alternation(literals) -> str:
    """One regex OR-ing the literals: polars runs it as a multi-literal search, faster than contains_any here."""
    return "|".join(re.escape(t) for t in sorted(literals, key=lambda t: (-len(t), t)))


def _file_columns(files: list[tuple[int, int, LogFile]], pieces: list[tuple[int, _Piece]]) -> pl.DataFrame:
    """What normalisation needs to know of the file each chunk comes from (files of several attempts are
    normalised together): `file_index` numbers the files of the attempt, `_file` those of the whole pass,
    `_attempt` is the attempt's position in the pass, `_piece` the piece's position in its unit and `_format` the
    file's format."""
    described = [(position, piece.index, *files[piece.index], piece.format) for position, piece in pieces]
    return pl.DataFrame(
        [(chunk, position, file, attempt, index, f.source, f.uri, f.node, f.rank, f.label, file_format)
         for chunk, (position, file, attempt, index, f, file_format) in enumerate(described)],
        schema={"_chunk": pl.Int32, "_piece": pl.Int32, "_file": pl.Int32, "_attempt": pl.Int32, "file_index": pl.Int32,
                "source": pl.String, "uri": pl.String, "_file_node": pl.String, "_file_rank": pl.Int32, "_label": pl.String,
                "_format": pl.String},
        orient="row",
    )


def _events(extracted: pl.DataFrame, metrics: pa.Table | None = None, origins: dict[str, str] | None = None) -> pl.DataFrame:
    """An attempt's events: those extracted from its lines, located in their backend when staged, and its metric
    anomalies (transforms/metric_events.py)."""
    if not origins and (metrics is None or not metrics.num_rows):
        return extracted
    events = extracted.lazy()
    if origins:
        events = _staged_locators(events, origins)
    if metrics is not None and metrics.num_rows:
        events = pl.concat([conform_events(events), metric_events(pl.from_arrow(metrics).lazy())], how="vertical_relaxed")
    return events.collect()


_EVENT_ORDER = ("ts", "source", "uri", "line", "kind")
_EVENT_ROWS_PER_BATCH = 16_384


def _event_batches(events: pl.DataFrame, recorder_events: pl.DataFrame, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The `events` rows: those of logs and metrics in time order, then the flight recorder's. Gathered a slice
    at a time, so an attempt with a hundred thousand events is not copied whole twice (sorted, then as Arrow)."""
    order = events.select(pl.arg_sort_by(_EVENT_ORDER, nulls_last=True, maintain_order=True)).to_series()
    for start in range(0, len(order), _EVENT_ROWS_PER_BATCH):
        yield from events[order[start:start + _EVENT_ROWS_PER_BATCH]].to_arrow().cast(schema).to_batches()
    if recorder_events.height:
        yield from conform_events(recorder_events.lazy()).collect().to_arrow().cast(schema).to_batches()


def _staged_locators(events: pl.LazyFrame, origins: dict[str, str]) -> pl.LazyFrame:
    """Events from staged files (connectors/base.py) are located in their backend: the locator carries the file's
    origin (backend URL, stream labels) and the line's own nanosecond timestamp as the backend returned it."""
    origin = pl.LazyFrame({"uri": list(origins), "_origin": list(origins.values())})
    ts_ns = (
        pl.col("raw").str.extract(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z)\s")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="ns", strict=False).dt.epoch("ns").cast(pl.String)
    )
    locator = pl.format('{{"origin": {}, "ts_ns": {}}}', pl.col("_origin"), pl.coalesce(ts_ns, pl.lit("null")))
    return (
        events.join(origin, on="uri", how="left", maintain_order="left")
        .with_columns(locator=pl.when(pl.col("_origin").is_not_null()).then(locator).otherwise(pl.col("locator")))
        .drop("_origin")
    )


def _land_metrics(ctx: AttemptContext, result: LandingResult, limits: GlobLimits) -> pa.Table:
    uris, missing = resolve_paths(ctx, ctx.metrics, "metrics", limits)
    for m in missing:
        result.reports.append(_report(ctx, "metrics_csv", m.source, m.pattern, m.status, 0, m.reason))
    frames = []
    for uri in uris:
        frame, report = read_metrics(uri, ctx)
        frames.append(frame)
        result.reports.append(_report(ctx, "metrics_csv", "metrics", uri, report.status, frame.height, report.reason, _safe_fingerprint(uri)))
    if not frames:
        return _NO_METRICS
    return pl.concat(frames).with_columns(attempt_id=pl.lit(ctx.attempt_id)).select("attempt_id", *METRICS_SCHEMA).to_arrow()


_NO_METRICS = pl.DataFrame(schema={"attempt_id": pl.String, **METRICS_SCHEMA}).to_arrow()


def _land_flight_recorder(ctx: AttemptContext, result: LandingResult, file_index_base: int,
                          limits: GlobLimits) -> tuple[pa.Table, pl.DataFrame]:
    """Flight-recorder dumps -> the `flight_recorder` table (always written, fixed schema) and their events."""
    uris, missing = resolve_paths(ctx, ctx.flight_recorder, "flight_recorder", limits)
    for m in missing:
        result.reports.append(_report(ctx, "flight_recorder", m.source, m.pattern, m.status, 0, m.reason))
    if not uris:  # most attempts: no dumps configured
        return _NO_RECORDER_ENTRIES, pl.DataFrame()
    entries, reports = read_dumps(uris, ctx)
    for r in reports:
        result.reports.append(_report(ctx, "flight_recorder", "flight_recorder", r["uri"], r["status"], r["rows"], r["reason"],
                                      _safe_fingerprint(r["uri"])))
    events = flight_recorder_events(entries, reports, ctx.attempt_id, ctx.rank_map(), file_index_base)
    return entries.to_arrow().cast(FLIGHT_RECORDER_SCHEMA), events


_NO_RECORDER_ENTRIES = FLIGHT_RECORDER_SCHEMA.empty_table()


def _report(ctx, connector, source, uri, status, rows, reason, fp=None, stats: LineStats | None = None,
            skipped: int = 0) -> dict:
    stats = stats or LineStats()
    return {
        "attempt_id": ctx.attempt_id, "connector": connector, "source": source, "uri": uri, "status": status,
        "rows": rows, "reason": reason, "fingerprint": fp, "lines_malformed": stats.malformed,
        "lines_binary": stats.binary, "lines_truncated": stats.truncated, "lines_skipped": skipped,
    }


def _safe_fingerprint(uri: str) -> str | None:
    try:
        return fingerprint(uri)
    except OSError:
        return None


def events_from_lines(lines: list[str], source: str = "applog", *, node: str | None = None, patterns: list[Pattern] | None = None) -> pl.DataFrame:
    """Literal lines through the production path (split, decorate, stamp, place, extract): the line catalog's and a
    rule author's way to see what a line becomes."""
    ctx = context_from_dict(
        {"workload_id": "lines", "start": "2026-11-29T00:00:00Z", "end": "2026-11-29T23:59:59Z", "nodes": [node or "localhost"]},
        "<lines>", ".",
    )
    log_file = LogFile(source, "mem://lines", node, None, "rank", "<lines>")
    chunk = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    piece = _Piece(0, log_file, chunk, first=True, last=True, format=detect_format(sample_lines(chunk)))
    frame, _ = _split_and_normalize([ctx], [(0, 0, log_file)], [piece], _Scan([], [], "$^", "$^"), LandingSettings())  # extraction reads every line
    frame, _ = anchor_files(frame.with_columns(attempt_id=pl.lit(ctx.attempt_id)), {})
    events = extract_events(frame.select(CANDIDATE_COLUMNS).lazy(), patterns if patterns is not None else load_patterns())
    return resolve_peers(events.collect(), ctx.nodes, ctx.addresses)
