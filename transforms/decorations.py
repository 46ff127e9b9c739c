"""Strip the decorations (stamps, labels, prefixes) from the start of log lines, keeping what they say.

The forms nest in a fixed order, outside-in:

    srun label or pdsh host, MPI/torchrun tag, clock header, "kernel:" tag, dmesg stamp, [rankN]:, application stamp, glog stamp

Each layer is peeled off by one anchored regex over the whole column (``str.extract_groups``), and the matched text
is cut off the line before the next layer is tried. Costs that shaped this:

* one regex for the whole grammar is several times slower: capture extraction pays for the size of the automaton
  on every matching line, so every layer gets its own small regex;
* every capture group costs time on every line, matched or not, except when no line of the batch is a candidate:
  each layer is first tested with a plain ``str.contains`` (no captures), and only candidate lines are handed to
  ``extract_groups``; a batch with no candidates (a kernel log has no glog stamps) skips that layer for free.

Clocks inside the message (the NCCL prefix, Slurm's ``CANCELLED AT``, torchrun's ``time :``) are read the same way
but not cut. The stamp parts are left as text in the internal ``STAMP_COLUMNS`` for ``timestamps.parse_timestamps``.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

# Patterns run in ASCII mode ((?-u)): decorations are ASCII and Unicode classes bloat the automata. Patterns of
# layers that are cut use no Unicode class at all, so a cut is as many characters as bytes. Where it costs nothing,
# a pattern is written so that the next byte always decides the path (month names factored, alternatives that start
# differently): the regex engine then extracts captures with its fast one-pass automaton.
_MON = r"(?:J(?:an|u[nl])|Feb|Ma[ry]|A(?:pr|ug)|Sep|Oct|Nov|Dec)"
_DOW = r"(?:S(?:un|at)|Mon|T(?:ue|hu)|Wed|Fri)"
_HMS = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
_DATE = r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
_OFFSET = r"(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)"
_HOST = r"[\w.-]+"  # no ':' and no brackets: keeps "kernel:" and "tag[pid]:" out of it
_SOURCE = r"[\w./-]+:\d+"  # file:line of a C++/Python logger
_NCCL_PREFIX = r"(?P<nccl_host>(?u:[^:\s])+):(?P<nccl_pid>\w+)(?::\d+)? \[(?P<nccl_dev>\d{1,4})\] "


@dataclass(frozen=True)
class _Layer:
    pattern: str  # anchored at the start of what is left of the line
    gate: str | None = None  # the lines to try; default: those the pattern matches
    cut: bool = True  # remove the match from ``msg``


def _launcher_label(hosts: Sequence[str]) -> _Layer:
    """`srun --label` ("12: ") or the host pdsh puts before each line (DeepSpeed's multi-node launcher,
    "worker-1: "). A word and ": " at a line's start is as often plain text ("error: ", "Traceback: "), so a pdsh
    host is only taken when it is one of `hosts` (the attempts' node names and short names, lower-case)."""
    named = "|".join(re.escape(h) for h in sorted(hosts, key=lambda h: (-len(h), h)))
    return _Layer(rf"(?: *(?P<srun_label>\d{{1,7}})|(?i:(?P<launcher_host>{named}))):(?: |$)" if named
                  else r" *(?P<srun_label>\d{1,7}):(?: |$)")


_LAYERS = (
    # Open MPI `--tag-output` "[job,rank]<stdout>:" (Horovod over MPI), Horovod's Gloo launcher "[rank]<stderr>:",
    # and torchrun `--tee` "[default3]:" (role "default" and the local rank); nothing after the ':' is cut, so a
    # traceback keeps its indentation
    _Layer(r"\[(?:(?:\d{1,7},)?(?P<mpi_rank>\d{1,7})\]<std(?:out|err|diag)>|default(?P<local_rank_prefix>\d{1,4})\]):"),
    # syslog RFC 3164, host optional ("May 18 19:02:39 kernel: "); journalctl short-precise adds a fraction
    _Layer(
        rf"(?P<_sy_mon>{_MON})  ?(?P<_sy_day>\d{{1,2}}) (?P<_sy_time>{_HMS})(?:\.(?P<_sy_frac>\d+))? "
        rf"(?:(?P<_sy_host>{_HOST}) )?"
    ),
    # ISO 8601 with zone: journalctl short-iso, rsyslog, `dmesg --time-format=iso` (comma decimal, facility and
    # level first with --decode), Talos remote syslog "addr: facility: level: [RFC 3339]: "; and the raw
    # /dev/kmsg record "priority,sequence,µs since boot,flags[,…];"
    _Layer(
        r"(?:(?P<_tl_host>[\w.:-]+?): [a-z]+: [a-z]+: \[|[a-z]+ *:[a-z]+ *: )?"
        rf"(?P<_iso_date>{_DATE})T(?P<_iso_time>{_HMS})(?:[.,](?P<_iso_frac>\d+))?(?P<_iso_off>{_OFFSET})(?:\]:)? "
        r"|\d+,\d+,(?P<_kmsg_us>\d+),[\x20-\x3a\x3c-\x7e]*;"
    ),
    # the kernel's syslog tag, after a syslog header or alone ("host kernel: ", "kernel: ")
    _Layer(rf"(?P<_kt_host>{_HOST}) kernel: "),
    _Layer(r"kernel: "),
    # dmesg stamps: seconds since boot (+ caller tag T…/C…; `dmesg -d` adds "<delta>"), dmesg -T, and the human
    # mode (`dmesg -H`): a minute stamp "[Nov29 01:49]" when the minute changes, "+seconds" since the previous
    # message in between; `dmesg -r` puts the raw level first ("<4>[2315424.099010] …")
    _Layer(
        r"(?:<\d{1,3}>)?\[(?: *(?P<_delta>\+)?(?P<_mono>\d+\.\d+)(?: <[ \d.]+>)?\] ?(?:\[ *[TC]\d+\] ?)?"
        rf"|{_DOW} (?P<_dt_mon>{_MON}) +(?P<_dt_day>\d{{1,2}}) (?P<_dt_time>{_HMS}) (?P<_dt_year>\d{{4}})\] ?"
        r"|(?P<_hm_mon>" + _MON + r")(?P<_hm_day>\d\d) (?P<_hm_time>(?:[01]\d|2[0-3]):[0-5]\d)\] ?)"
    ),
    _Layer(r"\[rank(?P<rank_prefix>\d{1,7})\]: ?"),
    # Python logging / DeepSpeed (",mmm"), NCCL >= 2.26 WARN (no fraction), Fabric Manager; Megatron prints its
    # stamp after a space (" [2024-08-01 09:44:55] iteration …"), which stays after an srun label is cut
    _Layer(
        rf" ?\[(?:(?P<_py_date>{_DATE}) (?P<_py_time>{_HMS})(?:,(?P<_py_frac>\d+))?"
        rf"|(?P<_fm_mon>{_MON}) (?P<_fm_day>\d\d) (?P<_fm_year>\d{{4}}) (?P<_fm_time>{_HMS}))\] "
    ),
    # glog: the bracketed PyTorch c10 form "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] " (month not
    # zero-padded), plain glog "E0318 13:21:42.765000 22421439703936 torch/…/api.py:833] " (thread id, file:line),
    # and the old PyTorch form "[E ProcessGroupNCCL.cpp:737] " without a time
    _Layer(
        r"\[?[IWEF](?:(?P<_gl_md>\d{3,4}) (?P<_gl_time>\d\d:\d\d:\d\d)\.(?P<_gl_frac>\d+) [\x20-\x5c\x5e-\x7e]*"
        rf"| {_SOURCE})\] ?"
    ),
    # NCCL debug prefix "host:pid:tid [cudaDev] ", only on NCCL's own lines (pid:tid may be redacted to one field);
    # the "NCCL " check is left to the gate, which keeps the capturing pattern one-pass
    _Layer(_NCCL_PREFIX, gate=rf"{_NCCL_PREFIX}(?:{_SOURCE} )?NCCL ", cut=False),
    # Slurm "*** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***" and the torchrun
    # failure block "  time      : 2023-06-14_22:36:10"
    _Layer(
        r"(?:slurmstepd: )?error: \*\*\* (?:JOB|STEP) (?u:\S)+ (?:ON (?u:\S)+ )?[A-Z ]*AT "
        rf"(?P<_sl_date>{_DATE})T(?P<_sl_time>{_HMS})"
        rf"| +time +: (?P<_tr_date>{_DATE})_(?P<_tr_time>{_HMS})",
        cut=False,
    ),
)

STAMP_COLUMNS = (
    "_sy_mon", "_sy_day", "_sy_time", "_sy_frac",
    "_iso_date", "_iso_time", "_iso_frac", "_iso_off",
    "_kmsg_us", "_delta", "_mono",
    "_dt_mon", "_dt_day", "_dt_time", "_dt_year", "_hm_mon", "_hm_day", "_hm_time",
    "_py_date", "_py_time", "_py_frac",
    "_fm_mon", "_fm_day", "_fm_year", "_fm_time",
    "_gl_md", "_gl_time", "_gl_frac",
    "_sl_date", "_sl_time", "_tr_date", "_tr_time",
)  # fmt: skip
_HOST_COLUMNS = ("_sy_host", "_tl_host", "_kt_host")


def _peel(lf: pl.LazyFrame, layer: _Layer) -> pl.LazyFrame:
    msg = pl.col("msg")
    candidates = pl.when(msg.str.contains(f"(?-u)^(?:{layer.gate or layer.pattern})")).then(msg)
    layer_text = "(?P<_layer>{})" if layer.cut else "(?:{})"
    # materialise the struct before unnesting: `expr.struct.unnest()` would evaluate `expr` once per field
    lf = lf.with_columns(
        _groups=candidates.str.extract_groups("(?-u)^" + layer_text.format(layer.pattern))
    ).unnest("_groups")
    if not layer.cut:
        return lf
    # the slice is computed for matched lines only (null offset elsewhere)
    return lf.with_columns(msg=pl.coalesce(msg.str.slice(pl.col("_layer").str.len_bytes()), msg)).drop("_layer")


def strip_decorations(lf: pl.LazyFrame, hosts: Sequence[str] = ()) -> pl.LazyFrame:
    """Add ``msg``, ``srun_label``, ``launcher_host``, ``local_rank_prefix``, ``rank_prefix``, ``nccl_host``,
    ``nccl_pid``, ``nccl_dev``, ``syslog_host`` and the internal ``STAMP_COLUMNS`` to a frame with a ``raw`` column.
    `hosts`: the names a pdsh host prefix may have (lower-case; ``placement.host_aliases``)."""
    lf = _peel(lf.with_columns(msg=pl.col("raw")), _launcher_label(hosts))
    if not hosts:  # the column where the layer would have put it
        lf = lf.with_columns(launcher_host=pl.lit(None, pl.String))
    for layer in _LAYERS:
        lf = _peel(lf, layer)
    return lf.with_columns(
        srun_label=pl.col("srun_label").cast(pl.Int32),
        local_rank_prefix=pl.col("local_rank_prefix").cast(pl.Int32),
        # an MPI tag and torch's "[rankN]:" both name the global rank; the inner one is the application's own
        rank_prefix=pl.coalesce("rank_prefix", "mpi_rank").cast(pl.Int32),
        nccl_dev=pl.col("nccl_dev").cast(pl.Int32),
        syslog_host=pl.coalesce(_HOST_COLUMNS),
    ).drop(*_HOST_COLUMNS, "mpi_rank")
