"""Strip the decorations (stamps, labels, prefixes) from the start of every log line, keeping what they say.

The forms are those of section 0 of the log-format reference. They nest in a fixed order, outside-in:

    srun label ─ kernel header ─ dmesg stamp ─ [rankN]: ─ application stamp ─ glog stamp ─ (message)

where each layer is optional and has several alternative forms. The whole grammar is ONE anchored regex, run once
per line by ``str.extract_groups``: the regex engine's DFA finds the end of the prefix and captures are resolved
on that short span only, so the cost depends on the prefix, not on the line length. The message (``msg``) is the
line minus the matched prefix. A few clocks that sit inside the message (the NCCL prefix, Slurm's ``CANCELLED AT``,
torchrun's ``time :``) are matched after the prefix without being stripped.

The stamp parts stay as raw text in the struct column ``_stamp`` for ``timestamps.parse_timestamps``.
"""
from __future__ import annotations

import polars as pl

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_HMS = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
_DATE = r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
_OFFSET = r"(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)"
# A syslog host never contains ':' or brackets, which keeps "kernel:" and "tag[pid]:" out of it.
_HOST = r"[^\s:\[\]]+"


def _iso(name: str, decimal: str) -> str:
    """ISO 8601 date-time with a zone; ``decimal`` is the fraction separator of the emitting tool."""
    return (
        rf"(?P<{name}_date>{_DATE})T(?P<{name}_time>{_HMS})"
        rf"(?:{decimal}(?P<{name}_frac>\d{{1,9}}))?(?P<{name}_off>{_OFFSET})"
    )


# Each layer is a list of alternatives; group-name prefixes say which form matched (timestamps.py reads them).
_SRUN_LABEL = r" *(?P<srun_label>\d{1,7}): "

_KERNEL_HEADER = [
    # syslog RFC 3164 (with or without host; journalctl short-precise adds a fraction)
    rf"(?P<sy_mon>{_MON}) {{1,2}}(?P<sy_day>[1-9]|[0-2]\d|3[01]) (?P<sy_time>{_HMS})(?:\.(?P<sy_frac>\d{{1,9}}))? "
    rf"(?:(?P<sy_host>{_HOST}) )?(?:kernel: )?",
    # journalctl short-iso(-precise) / rsyslog high-precision
    _iso("jn", r"\.") + rf" (?:(?P<jn_host>{_HOST}) )?(?:kernel: )?",
    # dmesg --time-format=iso, optionally with --decode's "facility:level :"
    r"(?:[a-z]+ *:[a-z]+ *: )?" + _iso("id", ",") + " ",
    # Talos-style remote syslog: source address, facility, level, bracketed RFC 3339
    r"(?P<tl_host>[\w.:-]+?): [a-z]+: [a-z]+: \[" + _iso("tl", r"\.") + r"\]: ",
    # raw /dev/kmsg record: priority,sequence,µs since boot,flags[,…];
    r"\d+,\d+,(?P<km_us>\d+),[^;,]*(?:,[^;]*)?;",
    # syslog remainder without a stamp
    rf"(?:(?P<kt_host>{_HOST}) )?kernel: ",
]

_DMESG_STAMP = [
    # seconds since boot, optionally followed by the caller (thread T… / CPU C…)
    r"\[ *(?P<mono>\d+\.\d+)\] ?(?:\[ *[TC]\d+\] ?)?",
    # --time-format=delta; relative to the previous line only
    r"\[ *\+\d+\.\d+\] ?",
    # dmesg -T
    rf"\[{_DOW} (?P<dt_mon>{_MON}) +(?P<dt_day>\d{{1,2}}) (?P<dt_time>{_HMS}) (?P<dt_year>\d{{4}})\] ?",
]

_RANK_PREFIX = r"\[rank(?P<rank_prefix>\d{1,7})\]: ?"

_APP_STAMP = [
    # Python logging / DeepSpeed (",mmm") and NCCL >= 2.26 WARN (no fraction)
    rf"\[(?P<py_date>{_DATE}) (?P<py_time>{_HMS})(?:,(?P<py_frac>\d{{1,6}}))?\] ",
    # Fabric Manager
    rf"\[(?P<fm_mon>{_MON}) (?P<fm_day>\d\d) (?P<fm_year>\d{{4}}) (?P<fm_time>{_HMS})\] ",
]

_GLOG = [
    # glog, bracketed (PyTorch c10: month not zero-padded) or plain (optionally with a thread id);
    # the day is always the last two digits of the month-day field.
    rf"\[?[IWEF](?P<gl_md>(?:0?[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])) (?P<gl_time>{_HMS})\.(?P<gl_frac>\d{{1,9}})"
    r"(?: +\d+)? [^\s\]]+:\d+\] ?",
    # old PyTorch C++ log: level and source only
    r"\[[IWEF] [^\s\]]+:\d+\] ?",
]

# Clocks inside the message: matched after the prefix, never stripped.
_IN_MESSAGE = [
    # NCCL debug prefix host:pid:tid [cudaDev], only on NCCL's own lines
    r"(?P<nccl_host>[^:\s]+):(?P<nccl_pid>\w+)(?::\d+)? \[(?P<nccl_dev>\d{1,4})\] (?:[\w./-]+:\d+ )?NCCL ",
    # slurmstepd: error: *** JOB 867816 ON node CANCELLED AT 2021-05-11T12:06:17 …
    rf"(?:slurmstepd: )?error: \*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?[A-Z ]*AT (?P<sl_date>{_DATE})T(?P<sl_time>{_HMS})",
    # torchrun failure block: "  time      : 2023-06-14_22:36:10"
    rf" +time +: (?P<tr_date>{_DATE})_(?P<tr_time>{_HMS})",
]


def _optional(alternatives: str | list[str]) -> str:
    if isinstance(alternatives, str):
        alternatives = [alternatives]
    return "(?:" + "|".join(f"(?:{a})" for a in alternatives) + ")?"


LINE_PATTERN = (
    "^(?P<_pfx>"
    + "".join(_optional(layer) for layer in (_SRUN_LABEL, _KERNEL_HEADER, _DMESG_STAMP, _RANK_PREFIX, _APP_STAMP, _GLOG))
    + ")"
    + _optional(_IN_MESSAGE)
)


def strip_decorations(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Add ``msg``, ``srun_label``, ``rank_prefix``, ``nccl_host``, ``nccl_pid``, ``nccl_dev``, ``syslog_host``
    and the internal struct ``_stamp`` (raw stamp parts for ``parse_timestamps``) to a frame with a ``raw`` column."""
    stamp = pl.col("_stamp").struct
    return (
        lf.with_columns(_stamp=pl.col("raw").str.extract_groups(LINE_PATTERN))
        .with_columns(
            msg=pl.col("raw").str.strip_prefix(stamp.field("_pfx")),
            srun_label=stamp.field("srun_label").cast(pl.Int32),
            rank_prefix=stamp.field("rank_prefix").cast(pl.Int32),
            nccl_host=stamp.field("nccl_host"),
            nccl_pid=stamp.field("nccl_pid"),
            nccl_dev=stamp.field("nccl_dev").cast(pl.Int32),
            syslog_host=pl.coalesce(stamp.field(f) for f in ("sy_host", "jn_host", "tl_host", "kt_host")),
        )
    )
