"""PyTorch NCCL flight-recorder dumps (`TORCH_NCCL_TRACE_BUFFER_SIZE`, one pickle per rank, `<prefix>_dump_<rank>`).

Dumps are pickles the training job writes, so they are read as hostile data, within bounds that hold while they are
read:
- a restricted unpickler refuses EVERY global: a real dump holds only dicts, lists, tuples, strings, numbers, booleans
  and None, and anything that names a class or function (os.system via GLOBAL/STACK_GLOBAL + REDUCE, ...) is refused
  before it can be called; sets, objects and out-of-band buffers are refused too, and dict keys must be scalars
  (hashing a key nested 10^6 deep would overflow the C stack);
- it runs at most MAX_PICKLE_OPS operations: each one adds at most one small object, a memo slot or a reference, so
  memory and time are bounded whatever the file repeats (a 190 MB dump of 10^8 memo references is refused early);
- fields become row values only as scalars (a list in `profiling_name` is not a name) or, for the sizes, as JSON of at
  most MAX_JSON_CHARS from a walk bounded in depth and items; a value shared by many entries is encoded once, and
  all text taken from one dump is bounded by MAX_DUMP_TEXT_CHARS.
Bad input becomes a report, never an exception.

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
# A real dump of 2,000 entries with their Python frames is about 750,000 operations
MAX_PICKLE_OPS = 4_000_000
# A real dump holds TORCH_NCCL_TRACE_BUFFER_SIZE entries (2,000 by default), but a pickle can reference one entry
# millions of times in a few MB: only the latest entries become rows, and no value's JSON text grows past a bound
MAX_ENTRIES = 65536
MAX_JSON_CHARS = 65536
MAX_JSON_DEPTH = 16        # sizes are lists of shapes: [[1024, 1024]]
MAX_TEXT_CHARS = 1024      # names, states, PG descriptions
MAX_DUMP_TEXT_CHARS = 32 * 2**20

_RANK_IN_NAME = re.compile(r"_dump_(\d+)$")
_SCALARS = (str, int, float, bool, type(None))


class RefusedGlobal(pickle.UnpicklingError):
    pass


class NotADump(ValueError):
    pass


def _key(key):
    if not isinstance(key, (str, bytes, int, float, type(None))):
        raise NotADump(f"not a dump: a dict key of type {type(key).__name__}")
    return key


class _BoundedUnpickler(pickle._Unpickler):  # the pure-Python unpickler: its steps can be counted and refused
    """Plain containers only, at most MAX_PICKLE_OPS operations: nothing can be constructed or called, and nothing
    grows past a bound."""

    def find_class(self, module, name):  # noqa: D401 - pickle API
        raise RefusedGlobal(f"refused: pickle references a global {module}.{name}")

    def persistent_load(self, pid):
        raise RefusedGlobal("refused: pickle uses a persistent id")

    def load(self):
        self._unframer = pickle._Unframer(self._file_read, self._file_readline)
        self.read, self.readinto, self.readline = self._unframer.read, self._unframer.readinto, self._unframer.readline
        self.metastack, self.stack = [], []
        self.append = self.stack.append
        self.proto = 0
        read, dispatch = self.read, _DISPATCH
        try:
            for _ in range(MAX_PICKLE_OPS):
                key = read(1)
                if not key:
                    raise EOFError("pickle data was truncated")
                step = dispatch.get(key[0])
                if step is None:
                    raise NotADump(f"not a dump: pickle opcode {key!r} builds something a dump does not hold")
                step(self)
        except pickle._Stop as stop:
            return stop.value
        raise NotADump(f"not a dump: more than {MAX_PICKLE_OPS} pickle operations")

    def load_setitem(self):
        value = self.stack.pop()
        key = self.stack.pop()
        self.stack[-1][_key(key)] = value

    def load_setitems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        for i in range(0, len(items) - 1, 2):
            target[_key(items[i])] = items[i + 1]

    def load_dict(self):
        items = self.pop_mark()
        self.append({_key(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)})


# what a dump is made of: containers, scalars, the memo, framing; globals go to find_class (refused)
_ALLOWED = {
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1",
    "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE",
    "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "EMPTY_LIST", "APPEND",
    "APPENDS", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_DICT", "DICT", "SETITEM",
    "SETITEMS", "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GLOBAL", "STACK_GLOBAL",
    "PERSID", "BINPERSID",
}
_OWN = {"SETITEM": "load_setitem", "SETITEMS": "load_setitems", "DICT": "load_dict"}
_DISPATCH = {
    code[0]: getattr(_BoundedUnpickler, _OWN[name]) if name in _OWN else pickle._Unpickler.dispatch[code[0]]
    for name in _ALLOWED for code in [getattr(pickle, name)]
}


def load_dump(data: bytes) -> dict:
    """Unpickle one dump with globals refused and its size bounded; raise ValueError/RefusedGlobal for anything that
    is not a dump."""
    if not data:
        raise ValueError("not a dump: empty file")
    try:
        obj = _BoundedUnpickler(io.BytesIO(data)).load()
    except (RefusedGlobal, NotADump):
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
    """One row per entry of every readable dump; one report dict per file (status ok/empty/error; an ok one carries
    the dump's `pgs` and `version`)."""
    rows, reports = [], []
    for uri in uris:
        dump, report = _read_one(uri)
        if dump is not None:
            fields = _Fields()
            report.update(pgs=_pg_config(dump, fields), version=fields.text(dump.get("version")))
            entries = dump["entries"]
            for i in range(max(0, len(entries) - MAX_ENTRIES), len(entries)):
                if isinstance(entries[i], dict):
                    rows.append(_entry_row(ctx.attempt_id, report["rank"], uri, i, entries[i], fields))
            if fields.dropped:
                dropped = f"{fields.dropped} values dropped: more than {MAX_DUMP_TEXT_CHARS} characters of text in one dump"
                report["reason"] = f"{report['reason']}; {dropped}" if report["reason"] else dropped
        reports.append(report)
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
    dump["entries"] = entries = dump.get("entries") or []
    reason = None if entries else "dump has no entries"
    if len(entries) > MAX_ENTRIES:
        reason = f"{len(entries) - MAX_ENTRIES} older entries skipped: more than {MAX_ENTRIES} in one dump"
    return dump, {**report, "status": "ok" if entries else "empty", "rows": min(len(entries), MAX_ENTRIES), "rank": rank,
                  "reason": reason}


def _pg_config(dump: dict, fields: "_Fields") -> dict[str, str | None]:
    """PG name -> description, for the PGs this rank belongs to (names and descriptions that are text)."""
    config = dump.get("pg_config")
    out = {}
    if isinstance(config, dict):
        for name, value in config.items():
            name = fields.text(name)
            if name is not None:
                out[name] = fields.text(value.get("desc")) if isinstance(value, dict) else None
    return out


_INT32, _INT64 = 2**31, 2**63


def _int(v, bound: int = _INT64):
    """An integer that fits its column (Int64 unless said), else None: a dump is data from the job, not trusted."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -bound <= v < bound else None


class _Fields:
    """Row values from one dump's fields, within that dump's text budget: scalars as text, sizes as JSON; a value
    shared by many entries (one object, many memo references) is encoded once."""

    def __init__(self):
        self.left = MAX_DUMP_TEXT_CHARS
        self.dropped = 0
        self._json: dict[int, str | None] = {}

    def _spend(self, text: str | None) -> str | None:
        if text is None:
            return None
        if len(text) > self.left:
            self.dropped += 1
            return None
        self.left -= len(text)
        return text

    def text(self, v) -> str | None:
        """A scalar as text (a string cut to MAX_TEXT_CHARS); None for anything else: a list is not a name."""
        if isinstance(v, bytes):
            v = v[:MAX_TEXT_CHARS].decode("utf-8", "replace")
        if isinstance(v, int) and not isinstance(v, bool):
            v = _int(v)
        if v is None or not isinstance(v, _SCALARS):
            return None
        return self._spend(str(v)[:MAX_TEXT_CHARS])

    def json(self, v) -> str | None:
        """The value as JSON text; None when it is not JSON, nested deeper than MAX_JSON_DEPTH or longer than
        MAX_JSON_CHARS."""
        if v is None:
            return None
        if id(v) not in self._json:
            self._json[id(v)] = _bounded_json(v)
        return self._spend(self._json[id(v)])


def _bounded_json(v) -> str | None:
    copy = _bounded_copy(v)
    if copy is None:
        return None
    try:
        text = json.dumps(copy)
    except ValueError:  # an integer of more than 4,300 digits
        return None
    return text if len(text) <= MAX_JSON_CHARS else None


def _bounded_copy(v):
    """A copy of `v` made of lists, string-keyed dicts and scalars, walked without recursion; None when it holds
    anything else, nests deeper than MAX_JSON_DEPTH or has more than MAX_JSON_CHARS items and characters (it could
    not be shorter as JSON)."""
    root: list = [None]
    work = [(v, root, 0, 0)]
    size = 0
    while work:
        value, parent, slot, depth = work.pop()
        size += 1 + (len(value) if isinstance(value, (str, list, tuple, dict)) else 0)
        if size > MAX_JSON_CHARS or depth > MAX_JSON_DEPTH:
            return None
        if isinstance(value, (list, tuple)):
            parent[slot] = copy = [None] * len(value)
            work.extend((item, copy, i, depth + 1) for i, item in enumerate(value))
        elif isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                return None
            parent[slot] = copy = dict.fromkeys(value)
            work.extend((item, copy, k, depth + 1) for k, item in value.items())
        elif isinstance(value, _SCALARS):
            parent[slot] = value
        else:
            return None
    return root[0]


def _entry_row(attempt_id: str, rank: int, uri: str, i: int, e: dict, fields: _Fields) -> dict:
    pg = e.get("process_group")
    pg = pg if isinstance(pg, (list, tuple)) else ()
    return {
        "attempt_id": attempt_id, "rank": rank, "pg_id": fields.text(e.get("pg_id")),
        "pg_name": fields.text(pg[0]) if len(pg) > 0 else None, "pg_desc": fields.text(pg[1]) if len(pg) > 1 else None,
        "collective_seq_id": _int(e.get("collective_seq_id")),
        "p2p_seq_id": _int(e.get("p2p_seq_id")), "is_p2p": e.get("is_p2p") if isinstance(e.get("is_p2p"), bool) else None,
        "op": fields.text(e.get("profiling_name")), "input_sizes": fields.json(e.get("input_sizes")),
        "output_sizes": fields.json(e.get("output_sizes")), "state": fields.text(e.get("state")),
        "time_created_ns": _int(e.get("time_created_ns")),
        "time_discovered_started_ns": _int(e.get("time_discovered_started_ns")),
        "time_discovered_completed_ns": _int(e.get("time_discovered_completed_ns")),
        "source": SOURCE, "uri": uri, "entry": i, "locator": json.dumps({"dump": uri, "entry": i}),
    }
