"""Strip the decorations (stamps, labels, prefixes) from the start of log lines, keeping what they say.

The forms are those of section 0 of the log-format reference. They nest in a fixed order, outside-in:

    srun label, clock header, "kernel:" tag, dmesg stamp, application prefix ([rankN]:, stamp, glog)

Each layer is optional and is peeled by one anchored regex over the whole column (``str.extract_groups``); the
matched text is cut off the line before the next layer is tried. One small regex per layer keeps each automaton
small, which is what makes capture extraction cheap (one regex for the whole grammar costs several times more).
Layers that start with a known character are skipped for a batch in which no line does. Clocks inside the
message (the NCCL prefix, Slurm's ``CANCELLED AT``, torchrun's ``time :``) are read without being cut.

The stamp parts are left as text in the internal columns ``STAMP_COLUMNS`` for ``timestamps.parse_timestamps``.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# Patterns run in ASCII mode ((?-u)): decorations are ASCII and Unicode classes bloat the automata. Negated
# classes are switched back to Unicode ((?u:…)) so that they never stop inside a UTF-8 character.
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_HMS = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
_DATE = r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
_OFFSET = r"(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)"
_HOST = r"(?u:[^\s:\[\]])+"  # a syslog host never has ':' or brackets, which keeps "kernel:" and "tag[pid]:" out


def _iso(form: str, decimal: str) -> str:
    """An ISO 8601 date-time with zone; ``decimal`` is the emitting tool's fraction separator."""
    return (
        rf"(?P<_{form}_date>{_DATE})T(?P<_{form}_time>{_HMS})"
        rf"(?:{decimal}(?P<_{form}_frac>\d+))?(?P<_{form}_off>{_OFFSET})"
    )


@dataclass(frozen=True)
class _Layer:
    alternatives: tuple[str, ...]  # tried at the start of what is left of the line
    first: str | None = None  # a regex every match starts with: the layer is skipped when no line does


_LAYERS = (
    _Layer((r" *(?P<srun_label>\d{1,7}): ",)),
    # clock headers written by syslog, journald, dmesg and /dev/kmsg
    _Layer((
        # RFC 3164; journalctl short-precise adds a fraction; the host-less form has "kernel:" right away
        rf"(?P<_sy_mon>{_MON}) {{1,2}}(?P<_sy_day>\d{{1,2}}) (?P<_sy_time>{_HMS})(?:\.(?P<_sy_frac>\d+))? "
        rf"(?:(?P<_sy_host>{_HOST}) )?",
        # journalctl short-iso(-precise), rsyslog
        _iso("jn", r"\.") + rf" (?:(?P<_jn_host>{_HOST}) )?",
        # dmesg --time-format=iso (comma decimal), --decode puts "facility:level :" first
        r"(?:[a-z]+ *:[a-z]+ *: )?" + _iso("id", ",") + " ",
        # Talos-style remote syslog: "addr: facility: level: [RFC 3339]: "
        r"(?P<_tl_host>(?u:[^\s\[\]])+?): [a-z]+: [a-z]+: \[" + _iso("tl", r"\.") + r"\]: ",
        # raw /dev/kmsg record "priority,sequence,µs since boot,flags[,…];"
        r"\d+,\d+,(?P<_kmsg_us>\d+),(?u:[^;,])*(?:,(?u:[^;])*)?;",
    )),
    # syslog tag of the kernel, also without a stamp ("host kernel: ", "kernel: ")
    _Layer((rf"(?:(?P<_kt_host>{_HOST}) )?kernel: ",)),
    # dmesg stamps
    _Layer((
        r"\[ *(?P<_mono>\d+\.\d+)\] ?(?:\[ *[TC]\d+\] ?)?",  # seconds since boot, optional caller tag
        r"\[ *\+(?P<_delta>\d+\.\d+)\] ?",  # --time-format=delta
        rf"\[{_DOW} (?P<_dt_mon>{_MON}) +(?P<_dt_day>\d{{1,2}}) (?P<_dt_time>{_HMS}) (?P<_dt_year>\d{{4}})\] ?",
    ), first=r"\["),
    # application prefixes: PyTorch rank, then a stamp (Python logging / DeepSpeed / NCCL >= 2.26 WARN, or Fabric
    # Manager), then glog (bracketed PyTorch c10 form with unpadded month, or plain glog with a thread id) or the
    # old stamp-less PyTorch form
    _Layer((
        r"(?:\[rank(?P<rank_prefix>\d{1,7})\]: ?)?"
        rf"(?:\[(?P<_py_date>{_DATE}) (?P<_py_time>{_HMS})(?:,(?P<_py_frac>\d+))?\] "
        rf"|\[(?P<_fm_mon>{_MON}) (?P<_fm_day>\d\d) (?P<_fm_year>\d{{4}}) (?P<_fm_time>{_HMS})\] )?"
        r"(?:\[?[IWEF](?P<_gl_md>(?:0?[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])) "
        rf"(?P<_gl_time>{_HMS})\.(?P<_gl_frac>\d+)(?: +\d+)? (?u:[^\s\]])+:\d+\] ?"
        r"|\[[IWEF] (?u:[^\s\]])+:\d+\] ?)?",
    ), first=r"\[|[IWEF]\d"),
)

_IN_MESSAGE = (
    # NCCL debug prefix "host:pid:tid [cudaDev] ", only on NCCL's own lines (pid:tid may be redacted to one field)
    r"(?P<nccl_host>(?u:[^:\s])+):(?P<nccl_pid>\w+)(?::\d+)? \[(?P<nccl_dev>\d{1,4})\] (?:(?u:[^\s])+:\d+ )?NCCL ",
    # slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***
    rf"(?:slurmstepd: )?error: \*\*\* (?:JOB|STEP) (?u:\S)+ (?:ON (?u:\S)+ )?[A-Z ]*AT (?P<_sl_date>{_DATE})T(?P<_sl_time>{_HMS})"
    # torchrun failure block "  time      : 2023-06-14_22:36:10"
    + rf"| +time +: (?P<_tr_date>{_DATE})_(?P<_tr_time>{_HMS})",
)

# The ISO clock header comes in three spellings; they are merged into one set of columns.
_ISO_FORMS = ("jn", "id", "tl")
_ISO_PARTS = ("date", "time", "frac", "off")

STAMP_COLUMNS = (
    "_sy_mon", "_sy_day", "_sy_time", "_sy_frac",
    *(f"_iso_{part}" for part in _ISO_PARTS),
    "_kmsg_us", "_mono", "_delta",
    "_dt_mon", "_dt_day", "_dt_time", "_dt_year",
    "_py_date", "_py_time", "_py_frac",
    "_fm_mon", "_fm_day", "_fm_year", "_fm_time",
    "_gl_md", "_gl_time", "_gl_frac",
    "_sl_date", "_sl_time", "_tr_date", "_tr_time",
)  # fmt: skip


def _any_line_starts_with(first: str) -> pl.Expr:
    return pl.col("msg").str.contains(f"^(?:{first})").any()


def _peel(lf: pl.LazyFrame, layer: _Layer) -> pl.LazyFrame:
    pattern = "(?-u)^(?P<_layer>" + "|".join(f"(?:{a})" for a in layer.alternatives) + ")"
    groups = pl.col("msg").str.extract_groups(pattern)
    if layer.first is not None:
        groups = pl.when(_any_line_starts_with(layer.first)).then(groups)
    return (
        lf.with_columns(groups.struct.unnest())
        .with_columns(msg=pl.col("msg").str.slice(pl.col("_layer").str.len_chars().fill_null(0)))
        .drop("_layer")
    )


def strip_decorations(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Add ``msg``, ``srun_label``, ``rank_prefix``, ``nccl_host``, ``nccl_pid``, ``nccl_dev``, ``syslog_host``
    and the internal ``STAMP_COLUMNS`` to a frame with a ``raw`` column."""
    lf = lf.with_columns(msg=pl.col("raw"))
    for layer in _LAYERS:
        lf = _peel(lf, layer)
    in_message = "(?-u)^(?:" + "|".join(f"(?:{a})" for a in _IN_MESSAGE) + ")"
    return (
        lf.with_columns(pl.col("msg").str.extract_groups(in_message).struct.unnest())
        .with_columns(
            *(pl.coalesce(f"_{form}_{part}" for form in _ISO_FORMS).alias(f"_iso_{part}") for part in _ISO_PARTS),
            srun_label=pl.col("srun_label").cast(pl.Int32),
            rank_prefix=pl.col("rank_prefix").cast(pl.Int32),
            nccl_dev=pl.col("nccl_dev").cast(pl.Int32),
            syslog_host=pl.coalesce("_sy_host", "_jn_host", "_tl_host", "_kt_host"),
        )
        .drop(
            *(f"_{form}_{part}" for form in _ISO_FORMS for part in _ISO_PARTS),
            "_sy_host", "_jn_host", "_tl_host", "_kt_host",
        )
    )
