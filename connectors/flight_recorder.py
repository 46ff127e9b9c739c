"""PyTorch NCCL flight-recorder dumps (`TORCH_NCCL_TRACE_BUFFER_SIZE`, one pickle per rank, `<prefix>_dump_<rank>`).

Dumps are pickles, so they are read with a restricted unpickler that refuses EVERY global: a real dump holds only
dicts, lists, strings, numbers, booleans and None, and anything that names a class or function (os.system via
GLOBAL/STACK_GLOBAL + REDUCE, …) is refused before it can be called. Bad input becomes a report, never an exception.

`read_dumps` returns one row per entry (`FLIGHT_RECORDER_ENTRY_SCHEMA`) plus per-file reports; the transform
`transforms/flight_recorder_events.py` turns them into events.
"""
from __future__ import annotations

import io
import json
import pickle
import posixpath
import re

import polars as pl

from firstfault.connectors.regular_files import read_at_most
from firstfault.connectors.static_context import AttemptContext
from firstfault.schema import FLIGHT_RECORDER_ENTRY_SCHEMA, FLIGHT_RECORDER_SOURCE

SOURCE = FLIGHT_RECORDER_SOURCE
MAX_DUMP_BYTES = 256 * 1024 * 1024
# A real dump holds TORCH_NCCL_TRACE_BUFFER_SIZE entries (2,000 by default), but a pickle can reference one entry
# millions of times in a few MB: only the latest entries become rows, and no value's JSON text grows past a bound
MAX_ENTRIES = 65536
MAX_JSON_CHARS = 65536

_RANK_IN_NAME = re.compile(r"_dump_(\d+)$")
_PLAIN = (dict, list, tuple, str, bytes, int, float, bool, type(None))


class RefusedGlobal(pickle.UnpicklingError):
    pass


class _RestrictedUnpickler(pickle.Unpickler):
    """Plain containers only: every global (class, function) is refused, so nothing can be constructed or called."""

    def find_class(self, module, name):  # noqa: D401 - pickle API
        raise RefusedGlobal(f"refused: pickle references a global {module}.{name}")

    def persistent_load(self, pid):
        raise RefusedGlobal("refused: pickle uses a persistent id")


def load_dump(data: bytes) -> dict:
    """Unpickle one dump with globals refused; raise ValueError/RefusedGlobal for anything that is not a dump."""
    if not data:
        raise ValueError("not a dump: empty file")
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except RefusedGlobal:
        raise
    except Exception as e:  # truncated / corrupt pickles raise many types (EOFError, UnpicklingError, IndexError, ...)
        raise ValueError(f"not a dump: {type(e).__name__}: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("entries", []), list):
        raise ValueError("not a dump: no entries list")
    return obj


def rank_of(dump: dict, uri: str) -> int | None:
    """The dump's rank, from its fields or its file name; None when neither holds one that fits the rank column."""
    for key in ("rank", "global_rank"):
        rank = _int(dump.get(key), _INT32)
        if rank is not None and rank >= 0:
            return rank
    m = _RANK_IN_NAME.search(posixpath.basename(uri))
    return _int(int(m.group(1)), _INT32) if m else None


def read_dumps(uris: list[str], ctx: AttemptContext) -> tuple[pl.DataFrame, list[dict]]:
    """One row per entry of every readable dump; one report dict per file (status ok/empty/error)."""
    rows, reports = [], []
    for uri in uris:
        dump, report = _read_one(uri)
        reports.append(report)
        if dump is None:
            continue
        rank = report["rank"]
        entries = dump.get("entries") or []
        first = max(0, len(entries) - MAX_ENTRIES)
        for i, e in enumerate(entries[first:], start=first):
            if isinstance(e, dict):
                rows.append(_entry_row(ctx.attempt_id, rank, uri, i, e))
    frame = pl.DataFrame(rows, schema=FLIGHT_RECORDER_ENTRY_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FLIGHT_RECORDER_ENTRY_SCHEMA)
    return frame, reports


def _read_one(uri: str) -> tuple[dict | None, dict]:
    report = {"uri": uri, "status": "ok", "rows": 0, "reason": None, "rank": None}
    try:
        data = read_at_most(uri, MAX_DUMP_BYTES)
        if len(data) > MAX_DUMP_BYTES:
            raise ValueError(f"not a dump: larger than {MAX_DUMP_BYTES} bytes")
        dump = load_dump(data)
    except RefusedGlobal as e:
        return None, {**report, "status": "error", "reason": str(e)}
    except (OSError, ValueError) as e:
        reason = str(e) if str(e).startswith("not a dump") else f"{type(e).__name__}: {e}"
        return None, {**report, "status": "error", "reason": reason}
    rank = rank_of(dump, uri)
    if rank is None:
        return None, {**report, "status": "error", "reason": "not a dump: no rank field and no _dump_<rank> file name"}
    entries = dump.get("entries") or []
    dump["_pgs"] = _pg_config(dump)
    reason = None if entries else "dump has no entries"
    if len(entries) > MAX_ENTRIES:
        reason = f"{len(entries) - MAX_ENTRIES} older entries skipped: more than {MAX_ENTRIES} in one dump"
    return dump, {**report, "status": "ok" if entries else "empty", "rows": min(len(entries), MAX_ENTRIES), "rank": rank,
                  "reason": reason, "dump": dump}


def _pg_config(dump: dict) -> dict[str, str]:
    """PG name -> description, for the PGs this rank belongs to."""
    config = dump.get("pg_config")
    out = {}
    if isinstance(config, dict):
        for name, value in config.items():
            desc = value.get("desc") if isinstance(value, dict) else None
            out[str(name)] = str(desc) if desc is not None else None
    return out


_INT32, _INT64 = 2**31, 2**63


def _int(v, bound: int = _INT64):
    """An integer that fits its column (Int64 unless said), else None: a dump is data from the job, not trusted."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -bound <= v < bound else None


def _entry_row(attempt_id: str, rank: int, uri: str, i: int, e: dict) -> dict:
    pg = e.get("process_group")
    pg_name = str(pg[0]) if isinstance(pg, (list, tuple)) and len(pg) > 0 else None
    pg_desc = str(pg[1]) if isinstance(pg, (list, tuple)) and len(pg) > 1 else None
    return {
        "attempt_id": attempt_id, "rank": rank, "pg_id": None if e.get("pg_id") is None else str(e.get("pg_id")),
        "pg_name": pg_name, "pg_desc": pg_desc, "collective_seq_id": _int(e.get("collective_seq_id")),
        "p2p_seq_id": _int(e.get("p2p_seq_id")), "is_p2p": e.get("is_p2p") if isinstance(e.get("is_p2p"), bool) else None,
        "op": str(e["profiling_name"]) if e.get("profiling_name") is not None else None,
        "input_sizes": _json(e.get("input_sizes")), "output_sizes": _json(e.get("output_sizes")),
        "state": str(e["state"]) if e.get("state") is not None else None,
        "time_created_ns": _int(e.get("time_created_ns")),
        "time_discovered_started_ns": _int(e.get("time_discovered_started_ns")),
        "time_discovered_completed_ns": _int(e.get("time_discovered_completed_ns")),
        "source": SOURCE, "uri": uri, "entry": i, "locator": json.dumps({"dump": uri, "entry": i}),
    }


def _json(v) -> str | None:
    """The value as JSON text; None when it is not JSON or longer than MAX_JSON_CHARS (encoded piece by piece, so
    a list that references itself a million times is not built first)."""
    if v is None:
        return None
    parts, size = [], 0
    try:
        for part in json.JSONEncoder(default=str).iterencode(v):
            size += len(part)
            if size > MAX_JSON_CHARS:
                return None
            parts.append(part)
    except (TypeError, ValueError, RecursionError):
        return None
    return "".join(parts)
