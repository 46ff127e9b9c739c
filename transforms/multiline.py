"""Events that span several log lines.

The engine (``transforms/extract.py``) keeps every line that contains one of :data:`MULTILINE_TRIGGERS` (or a
pattern trigger) in one candidate frame and hands it to each of :data:`ASSEMBLERS`. An assembler sees the candidate
lines of all files and ranks mixed and in no order; it sorts them itself and returns events (columns of
``EVENT_SCHEMA``; missing ones are filled by the engine's ``conform_events``).

Everything is columnar: the lines of one *stream* (one file, one node, one rank) are ordered by line number and
walked with window expressions (shift / cum_sum / forward fill over the stream) and ``group_by`` — no per-line
Python.

* ``python_exception``: the ``<ExceptionClass>: <message>`` line (column 0 once a ``[rankN]: `` prefix is removed)
  that ends a ``Traceback (most recent call last):``. Chained exceptions (``The above exception was the direct
  cause …`` / ``During handling of the above exception …``) share a chain; ``fields.chain_index`` 0 and
  ``fields.innermost = "true"`` mark the first (innermost) one, which is the cause.
* ``torchrun_failure``: one event per ``[i]:`` entry of a torchrun ``ChildFailedError`` block, located at the
  entry's ``rank      :`` line; ``fields.root_cause = "true"`` for the entry under ``Root Cause (first observed
  failure):``. ``<NO_OTHER_FAILURES>`` yields nothing.
* ``nccl_last_error``: PyTorch's ``Last error:`` line after an ncclResult; ``fields.text`` = the text on the same
  line or on the next line of the stream (NCCL's last WARN text), when that line is a candidate.

Because the candidate frame holds only trigger lines, a traceback's frames are never seen; the exception line is
found as the first column-0 ``Class: message`` candidate after the ``Traceback`` line of the same stream. An
exception class must therefore contain one of the class-name triggers below (``Error``, ``Exception``, …).
"""
from __future__ import annotations

from typing import Callable

import polars as pl

from firstfault.schema import RAW_MAX, conform_events

__all__ = [
    "MULTILINE_TRIGGERS",
    "ENTRY_HEADER_TRIGGER",
    "is_multiline_candidate",
    "or_entry_header",
    "ASSEMBLERS",
    "assemble_python_exceptions",
    "assemble_torchrun_failures",
    "assemble_nccl_last_error",
]

# ------------------------------------------------------------------------------------------ triggers

_TRACEBACK_TRIGGERS = [
    "Traceback (most recent call last)",
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception",
    # the last line of a traceback: a class name; these cover the builtin and most library exception names
    "Error",
    "Exception",
    "Interrupt",
    "Exit",
    "StopIteration",
    "Failed",
    "Unsupported",
    "NotFound",
]

_TORCHRUN_TRIGGERS = [
    "Failures:",
    "Root Cause (first observed failure)",
    "<NO_OTHER_FAILURES>",
    "time      :",
    "host      :",
    "rank      :",
    "exitcode  :",
    "error_file:",
    "traceback :",
]
#: the `[i]:` entry headers of a torchrun failure block. A regex, not literals: any literal (`1]:`) also matches every
#: `[rank1]:`-prefixed line and every `systemd[1]:` syslog line, which made a large share of all lines candidates.
ENTRY_HEADER_TRIGGER = r"^(?:\[rank\d{1,7}\]: ?)?\s*\[\d+\]:\s*$"

_LAST_ERROR_TRIGGERS = [
    "Last error:",
    # The line after `Last error:` repeats NCCL's last WARN text. It is a candidate whenever a pattern of
    # transforms/patterns/nccl.yaml knows it (the engine's candidate frame is the union of all triggers); these add
    # the NCCL texts no pattern names.
    "NET/OFI",
    "NET/IB",
    "Cuda failure",
    "failed :",
]

#: literals that put a line into the candidate frame handed to the assemblers (with ENTRY_HEADER_TRIGGER)
MULTILINE_TRIGGERS: list[str] = sorted(set(_TRACEBACK_TRIGGERS + _TORCHRUN_TRIGGERS + _LAST_ERROR_TRIGGERS))


def or_entry_header(keep: pl.Expr, msg: pl.Expr | None = None) -> pl.Expr:
    """``keep`` (a trigger test on ``msg``), or the line is a torchrun `[i]:` entry header: every candidate filter
    that feeds the assemblers adds the headers this way."""
    msg = pl.col("msg") if msg is None else msg
    return keep.fill_null(False) | msg.str.contains(ENTRY_HEADER_TRIGGER).fill_null(False)


def is_multiline_candidate(msg: pl.Expr) -> pl.Expr:
    """Whether a line belongs in the candidate frame of the assemblers."""
    return or_entry_header(msg.str.contains_any(MULTILINE_TRIGGERS), msg)

# ------------------------------------------------------------------------------------------ helpers

#: a stream = the lines one process wrote into one file
_STREAM = ["attempt_id", "source", "file_index", "uri", "node", "_srank"]

_RANK_PREFIX_RE = r"^\[rank(\d{1,7})\]: ?"
# `pkg.mod.ClassName: message`, `ClassName:`, `ClassName`
_EXC_RE = r"^(?P<cls>(?:[A-Za-z_]\w*\.)*(?P<last>[A-Za-z_]\w*))(?::(?:\s+(?P<text>.*\S))?\s*)?$"
# a traceback's exception line may be this many lines after its `Traceback` line (interleaved ranks included)
_MAX_TRACEBACK_LINES = 5000
# `Last error:` text may be this many lines further down the same stream
_MAX_LAST_ERROR_GAP = 5


def _prepare(cand: pl.LazyFrame, triggers: list[str] | None = None, *, entry_headers: bool = False) -> pl.LazyFrame:
    """Keep the lines with one of ``triggers`` (all when None; with ``entry_headers`` also the `[i]:` lines), add
    `_body` (msg without a `[rankN]: ` prefix) and `_srank` (the stream's rank), sort by file and line."""
    if triggers is not None:
        keep = pl.col("msg").str.contains_any(triggers).fill_null(False)
        cand = cand.filter(or_entry_header(keep) if entry_headers else keep)
    msg = pl.col("msg").fill_null("")
    return cand.with_columns(
        _body=msg.str.replace(_RANK_PREFIX_RE, ""),
        _srank=pl.coalesce(
            pl.col("rank").cast(pl.Int32),
            msg.str.extract(_RANK_PREFIX_RE, 1).cast(pl.Int32, strict=False),
        ),
    ).sort(["attempt_id", "source", "file_index", "uri", "line"], nulls_last=True)


def _fields_json(members: dict[str, pl.Expr]) -> pl.Expr:
    """JSON object with sorted keys and string values; null members are left out (as the engine does)."""
    parts = [
        pl.when(v.is_not_null()).then(
            pl.struct(v.cast(pl.String).alias(k)).struct.json_encode().str.slice(1).str.head(-1)
        )
        for k, v in sorted(members.items())
    ]
    body = pl.concat_str(parts, separator=",", ignore_nulls=True)
    return pl.concat_str([pl.lit("{"), body.fill_null(""), pl.lit("}")])


def _bool_text(e: pl.Expr) -> pl.Expr:
    return pl.when(e).then(pl.lit("true")).otherwise(pl.lit("false"))


def _event_frame(lf: pl.LazyFrame, kind: str, cols: dict[str, pl.Expr], fields: dict[str, pl.Expr]) -> pl.LazyFrame:
    """Project assembled rows (which carry the locator columns of their evidence line) into EVENT_SCHEMA."""
    base: dict[str, pl.Expr] = {
        "attempt_id": pl.col("attempt_id"),
        "event_id": pl.concat_str(
            [pl.col("source"), pl.col("file_index"), pl.col("line"), pl.lit(kind)], separator=":"
        ),
        "kind": pl.lit(kind),
        "node": pl.col("node"),
        "rank": pl.col("_srank"),
        "local_rank": pl.col("local_rank"),
        "ts": pl.col("ts"),
        "ts_quality": pl.col("ts_quality"),
        "message": pl.col("_body"),
        "fields": _fields_json(fields),
        "source": pl.col("source"),
        "uri": pl.col("uri"),
        "line": pl.col("line"),
        "raw": pl.col("raw").str.slice(0, RAW_MAX),
    }
    base.update(cols)
    return conform_events(lf.select([e.alias(c) for c, e in base.items()]))


# ------------------------------------------------------------------------------------------ python tracebacks


def assemble_python_exceptions(cand: pl.LazyFrame) -> pl.LazyFrame:
    body = pl.col("_body")
    exc = body.str.extract_groups(_EXC_RE)
    lf = _prepare(cand, _TRACEBACK_TRIGGERS).with_columns(
        _is_tb=body.str.starts_with("Traceback (most recent call last)"),
        _is_sep=body.str.starts_with("The above exception was the direct cause of the following exception")
        | body.str.starts_with("During handling of the above exception, another exception occurred"),
        _cls=exc.struct.field("cls"),
        _last=exc.struct.field("last"),
        _text=exc.struct.field("text"),
    )
    # a class name: starts upper case and has a lower-case letter (keeps out `INFO:`, `WARNING:`)
    shaped = pl.col("_cls").is_not_null() & pl.col("_last").str.contains(r"^[A-Z]\w*[a-z]")
    lf = lf.with_columns(_shaped=shaped & ~pl.col("_is_tb") & ~pl.col("_is_sep"))

    # 1. an exception line ends a traceback iff the previous traceback-or-class-shaped line of its stream is the
    #    `Traceback` line (a multi-line message's `ncclRemoteError: …` follows the exception line, not a Traceback)
    mark = (
        pl.when(pl.col("_is_tb"))
        .then(pl.lit("tb"))
        .when(pl.col("_shaped"))
        .then(pl.lit("exc"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    mark_line = pl.when(pl.col("_is_tb") | pl.col("_shaped")).then(pl.col("line"))
    lf = lf.with_columns(
        _prev_mark=mark.shift(1).forward_fill().over(_STREAM),
        _tb_line=mark_line.shift(1).forward_fill().over(_STREAM),
    ).with_columns(
        _is_end=(
            pl.col("_shaped")
            & (pl.col("_prev_mark") == "tb")
            & ((pl.col("line") - pl.col("_tb_line")) <= _MAX_TRACEBACK_LINES)
        ).fill_null(False)
    )

    # 2. chains: a Traceback right after a separator continues the chain of the exception before the separator
    marks = (
        lf.filter(pl.col("_is_tb") | pl.col("_is_sep") | pl.col("_is_end"))
        .with_columns(_prev_sep=pl.col("_is_sep").shift(1).over(_STREAM).fill_null(False))
        .with_columns(_chain=(pl.col("_is_tb") & ~pl.col("_prev_sep")).cum_sum().over(_STREAM))
        .filter(pl.col("_is_end"))
        .with_columns(
            _chain_index=pl.int_range(pl.len()).over([*_STREAM, "_chain"]),
            _chain_len=pl.len().over([*_STREAM, "_chain"]),
        )
    )
    return _event_frame(
        marks,
        "python_exception",
        {"code_text": pl.col("_cls"), "severity": pl.lit("error")},
        {
            "message": pl.col("_text"),
            "innermost": _bool_text(pl.col("_chain_index") == 0),
            "chain_index": pl.col("_chain_index"),
            "chain_len": pl.col("_chain_len"),
            "traceback_line": pl.col("_tb_line"),
        },
    )


# ------------------------------------------------------------------------------------------ torchrun blocks

# the keys of an entry, with torchrun's fixed padding (`  time      : …`, `  error_file: …`)
_KEY_RE = (
    r"^\s+(?P<key>time(?: {6})|host(?: {6})|rank(?: {6})|exitcode(?:  )|error_file|traceback(?: ))"
    r": ?(?P<val>.*?)\s*$"
)
_INDEX_RE = r"^\s*\[(\d+)\]:\s*$"
# the exception line of a traceback quoted in the `traceback :` field (indented by two spaces)
_QUOTED_EXC_RE = r"^  (?:[A-Za-z_]\w*\.)*[A-Z]\w*[a-z]\w*:(?:\s.*)?$"


def assemble_torchrun_failures(cand: pl.LazyFrame) -> pl.LazyFrame:
    body = pl.col("_body")
    kv = body.str.extract_groups(_KEY_RE)
    lf = (
        _prepare(cand, _TORCHRUN_TRIGGERS + _TRACEBACK_TRIGGERS, entry_headers=True)
        .with_columns(
            _failures=body.str.contains(r"^\s*Failures:\s*$"),
            _root=body.str.contains(r"^\s*Root Cause \(first observed failure\):"),
            _idx=body.str.extract(_INDEX_RE, 1),
            _key=kv.struct.field("key").str.strip_chars_end(),
            _val=kv.struct.field("val"),
            _quoted=body.str.contains(_QUOTED_EXC_RE),
        )
        .filter(
            pl.col("_failures")
            | pl.col("_root")
            | pl.col("_idx").is_not_null()
            | pl.col("_key").is_not_null()
            | pl.col("_quoted")
        )
    )
    key = pl.col("_key")
    # an entry starts at its `[i]:` line, or at a `time` line that has none right before it
    start = pl.col("_idx").is_not_null() | (
        (key == "time") & pl.col("_idx").shift(1).over(_STREAM).is_null()
    )
    section = (
        pl.when(pl.col("_failures"))
        .then(pl.lit("failures"))
        .when(pl.col("_root"))
        .then(pl.lit("root"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    lf = lf.with_columns(
        _start=start.fill_null(False),
        _section=section.forward_fill().over(_STREAM),
    ).with_columns(_entry=pl.col("_start").cum_sum().over(_STREAM))

    def val(k: str) -> pl.Expr:
        return pl.col("_val").filter(key == k).first()

    def at_anchor(c: str) -> pl.Expr:
        return pl.coalesce(pl.col(c).filter(key == "rank").first(), pl.col(c).filter(pl.col("_start")).first())

    tb_line = pl.col("line").filter(key == "traceback").first()
    entries = (
        lf.filter(pl.col("_entry") > 0)
        .group_by([*_STREAM, "_entry"], maintain_order=True)
        .agg(
            _has_start=pl.col("_start").any(),
            _idx=pl.col("_idx").filter(pl.col("_start")).first(),
            _section=pl.col("_section").filter(pl.col("_start")).first(),
            _time=val("time"),
            _host=val("host"),
            _rank_v=val("rank"),
            _exit_v=val("exitcode"),
            _error_file=val("error_file"),
            _traceback=val("traceback"),
            _quoted_exc=pl.col("_body")
            .filter(
                pl.col("_quoted")
                & (pl.col("line") > tb_line)
                & (pl.col("line") - tb_line <= _MAX_TRACEBACK_LINES)
            )
            .first()
            .str.strip_chars(),
            line=at_anchor("line"),
            local_rank=at_anchor("local_rank"),
            ts=at_anchor("ts"),
            ts_quality=at_anchor("ts_quality"),
            raw=at_anchor("raw"),
            _body=at_anchor("_body"),
        )
        .filter(pl.col("_has_start"))
    )
    rank_g = pl.col("_rank_v").str.extract_groups(r"^(?P<r>-?\d+)(?:\s*\(local_rank:\s*(?P<l>\d+)\))?")
    exit_g = pl.col("_exit_v").str.extract_groups(r"^(?P<e>-?\d+)(?:\s*\(pid:\s*(?P<p>\d+)\))?")
    entries = entries.with_columns(
        _srank=rank_g.struct.field("r").cast(pl.Int32, strict=False),
        _lr=rank_g.struct.field("l").cast(pl.Int32, strict=False),
        _exit=exit_g.struct.field("e").cast(pl.Int32, strict=False),
        _pid=exit_g.struct.field("p").cast(pl.Int64, strict=False),
    )
    traceback = (
        pl.when(
            pl.col("_traceback").str.starts_with("Traceback (most recent call last)")
            & pl.col("_quoted_exc").is_not_null()
        )
        .then(pl.col("_quoted_exc"))
        .otherwise(pl.col("_traceback"))
    )
    return _event_frame(
        entries,
        "torchrun_failure",
        {
            "local_rank": pl.coalesce(pl.col("_lr"), pl.col("local_rank")),
            "exit_code": pl.col("_exit"),
            "signal": pl.when(pl.col("_exit") < 0).then(-pl.col("_exit")),
            "pid": pl.col("_pid"),
            "severity": pl.lit("error"),
        },
        {
            "idx": pl.col("_idx"),
            "host": pl.col("_host"),
            "time": pl.col("_time"),
            "root_cause": _bool_text(pl.col("_section") == "root"),
            "error_file": pl.col("_error_file"),
            "traceback": traceback,
        },
    )


# ------------------------------------------------------------------------------------------ `Last error:`


def assemble_nccl_last_error(cand: pl.LazyFrame) -> pl.LazyFrame:
    body = pl.col("_body")
    last = (
        _prepare(cand, ["Last error:"])
        .filter(body.str.contains(r"^\s*Last error:"))
        .with_columns(_inline=body.str.extract(r"^\s*Last error:\s*(\S.*?)\s*$", 1))
    )
    # the next candidate line of the same stream, at most _MAX_LAST_ERROR_GAP lines further down
    wanted = (
        last.select(*_STREAM, pl.col("line").alias("_at"))
        .with_columns(_off=pl.int_ranges(1, _MAX_LAST_ERROR_GAP + 1))
        .explode("_off")
        .with_columns(line=pl.col("_at") + pl.col("_off"))
    )
    following = (
        _prepare(cand)
        .select(*_STREAM, "line", pl.col("_body").alias("_next"))
        .join(wanted, on=[*_STREAM, "line"], how="inner", nulls_equal=True)
        .sort("_off")
        .group_by([*_STREAM, "_at"])
        .agg(pl.col("_next").first())
        .rename({"_at": "line"})
    )
    lf = last.join(following, on=[*_STREAM, "line"], how="left", nulls_equal=True)
    text = pl.when(~pl.col("_next").str.contains(r"^\s*Last error:")).then(pl.col("_next").str.strip_chars())
    return _event_frame(
        lf,
        "nccl_last_error",
        {"severity": pl.lit("error")},
        {"text": pl.coalesce(pl.col("_inline"), text)},
    )


#: the multi-line assemblers the engine runs over the candidate frame
ASSEMBLERS: list[Callable[[pl.LazyFrame], pl.LazyFrame]] = [
    assemble_python_exceptions,
    assemble_torchrun_failures,
    assemble_nccl_last_error,
]
