"""The per-file fast path of ``decorations.strip_decorations``: the common line shapes cut at fixed positions.

A file's format is detected once, from the first lines of its first chunk (``detect_format``). Each format is a few
line shapes; a line fits a shape when one anchored regex without captures matches it, and its decorations are then
cut with ``str.slice`` at fixed offsets (or after the first ``:``/``]``, which the shape pins). Lines of a file that
fit none of its format's shapes, and files of no known format, go through ``strip_decorations``.

Both paths give the same columns, to the byte (tests/transforms/test_fast_path.py). A shape only admits lines on
which every layer of ``strip_decorations`` does what the shape does: the layers it reads match exactly the text it
cuts, and the others cannot match. Where a later layer could start on what is left of the line, the shape pins its
first characters (``_PLAIN``): not ``[`` or a space (rank, Python stamp, Slurm/torchrun clocks), no glog level
letter before a digit or a space, no lower-case ``e``/``s`` (Slurm's ``error:``/``slurmstepd:``), and a first word
that ends at a space, the line's end or ``": "`` (an NCCL prefix needs ``host:pid``).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import polars as pl

from firstfault.transforms.decorations import _DATE, _DOW, _HMS, _MON, strip_decorations
from firstfault.transforms.fixed_positions import read_rank_glog, read_srun_stamped, read_syslog_kernel
from firstfault.transforms.timestamps import READ_DAY, READ_LOCAL_US, READ_MONO, READ_MONTH, READ_TIME_US

_WORD = r"[\w.()\[\]-]*:?(?: |$)"  # a first word that cannot start an NCCL prefix
# What is left after the layers a shape reads, such that no later layer can match it (module docstring): its first
# character is none of "[", " ", "e", "s", and a glog level letter only before a letter or punctuation.
_PLAIN = rf"(?:$|(?:[a-df-rt-zA-DGHJ-VX-Z0-9_.()-]|[IWEF][a-zA-Z_.()\[\]-]){_WORD})"
# the same after a glog stamp, the last layer that cuts: only the NCCL prefix and the Slurm/torchrun clocks follow
_PLAIN_AFTER_GLOG = rf"(?:$|[a-df-rt-zA-Z0-9_.()\[\]-]{_WORD})"
_LABEL = r" *\d{1,7}: "  # srun --label, padded to the widest label
_PY_STAMP = rf" ?\[{_DATE} {_HMS}\] "  # Megatron, Python logging without a fraction
# "host:pid:tid [dev] [file:line ]NCCL ": a host starting with a letter keeps the clock layers off it
_NCCL = r"[A-Za-z][\w.-]*:\d+:\d+ \[\d{1,4}\] (?:[\w./-]+:\d+ )?NCCL "
_RANK_GLOG = r"\[rank\d{1,7}\]: ?\[[IWEF]\d{3,4} \d\d:\d\d:\d\d\.(?:\d{9}|\d{6}) [\x20-\x5c\x5e-\x7e]*\] ?"


def _at(offset: pl.Expr | int, text: str) -> pl.Expr:
    """1 where the raw line has `text` (one character) at `offset`, else 0."""
    return (pl.col("raw").str.slice(offset, 1) == text).cast(pl.Int64)


def _srun_label(lf: pl.LazyFrame) -> pl.LazyFrame:
    """`srun_label` and `_body` (where the text after the label starts); the label has no ':', so its end is the
    line's first one."""
    colon = pl.col("raw").str.find(":", literal=True).cast(pl.Int64)
    return lf.with_columns(_colon=colon).with_columns(
        srun_label=pl.col("raw").str.head(pl.col("_colon")).str.strip_chars_start(" "), _body=pl.col("_colon") + 2
    ).drop("_colon")


def _cut_py_stamp(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The Python/Megatron stamp at `_body` (after an optional space): its parts, and `msg` after it."""
    lf = lf.with_columns(_stamp=pl.col("_body") + _at(pl.col("_body"), " ") + 1)
    stamp = pl.col("_stamp")
    return lf.with_columns(
        _py_date=pl.col("raw").str.slice(stamp, 10), _py_time=pl.col("raw").str.slice(stamp + 11, 8),
        msg=pl.col("raw").str.slice(stamp + 21),
    ).drop("_stamp")


def _nccl_prefix(lf: pl.LazyFrame) -> pl.LazyFrame:
    """`nccl_host`, `nccl_pid`, `nccl_dev` of the NCCL prefix `msg` starts with (it stays in `msg`): host, pid and
    tid have no space and the host no ']', so the prefix's first space and first ']' bound them."""
    msg = pl.col("msg")
    lf = lf.with_columns(_space=msg.str.find(" ", literal=True).cast(pl.Int64),
                         _close=msg.str.find("]", literal=True).cast(pl.Int64))
    ids = msg.str.head(pl.col("_space")).str.split_exact(":", 2)
    return lf.with_columns(
        nccl_host=ids.struct.field("field_0"), nccl_pid=ids.struct.field("field_1"),
        nccl_dev=msg.str.slice(pl.col("_space") + 2, pl.col("_close") - pl.col("_space") - 2),
    ).drop("_space", "_close")


def _cut_rank_glog(lf: pl.LazyFrame) -> pl.LazyFrame:
    """torchrun's "[rankN]:" and the glog stamp after it: their parts, and `msg` after them. The month-day has 3 or
    4 digits and the fraction 6 or 9 (the shape pins both); the file:line ends at the first ']' after it."""
    raw = pl.col("raw")
    lf = lf.with_columns(_rank_end=raw.str.find("]", literal=True).cast(pl.Int64))
    lf = lf.with_columns(_glog=pl.col("_rank_end") + 2 + _at(pl.col("_rank_end") + 2, " "))
    lf = lf.with_columns(_md_len=4 - _at(pl.col("_glog") + 5, " "))
    lf = lf.with_columns(_time=pl.col("_glog") + 3 + pl.col("_md_len"))
    lf = lf.with_columns(_frac_len=6 + 3 * (1 - _at(pl.col("_time") + 15, " ")))
    lf = lf.with_columns(_tail=raw.str.slice(pl.col("_time") + 9 + pl.col("_frac_len")))
    lf = lf.with_columns(_tail_close=pl.col("_tail").str.find("]", literal=True).cast(pl.Int64))
    tail, close = pl.col("_tail"), pl.col("_tail_close")
    return lf.with_columns(
        rank_prefix=raw.str.slice(pl.col("_body") + 5, pl.col("_rank_end") - pl.col("_body") - 5),
        _gl_md=raw.str.slice(pl.col("_glog") + 2, pl.col("_md_len")),
        _gl_time=raw.str.slice(pl.col("_time"), 8),
        _gl_frac=raw.str.slice(pl.col("_time") + 9, pl.col("_frac_len")),
        msg=tail.str.slice(close + 1 + (tail.str.slice(close + 1, 1) == " ").cast(pl.Int64)),
    ).drop("_rank_end", "_glog", "_md_len", "_time", "_frac_len", "_tail", "_tail_close")


def _body_msg(lf: pl.LazyFrame) -> pl.LazyFrame:
    """`msg`: the text after the srun label."""
    return lf.with_columns(msg=pl.col("raw").str.slice(pl.col("_body")))


def _syslog_kernel(lf: pl.LazyFrame) -> pl.LazyFrame:
    """RFC 3164 header "Mon DD HH:MM:SS host kernel: [secs] ": the host (no space) ends at the first " kernel: ",
    the seconds since boot at the line's first ']'."""
    raw = pl.col("raw")
    lf = lf.with_columns(
        _host_len=raw.str.find(" kernel: ", literal=True).cast(pl.Int64) - 16,
        _mono_end=raw.str.find("]", literal=True).cast(pl.Int64),
    )
    mono_start = 16 + pl.col("_host_len") + 10  # after " kernel: ["
    return lf.with_columns(
        _sy_mon=raw.str.head(3), _sy_day=raw.str.slice(4, 2).str.strip_chars_start(" "), _sy_time=raw.str.slice(7, 8),
        syslog_host=raw.str.slice(16, pl.col("_host_len")),
        _mono=raw.str.slice(mono_start, pl.col("_mono_end") - mono_start).str.strip_chars_start(" "),
        msg=raw.str.slice(pl.col("_mono_end") + 1 + _at(pl.col("_mono_end") + 1, " ")),
    ).drop("_host_len", "_mono_end")


def _dmesg_t(lf: pl.LazyFrame) -> pl.LazyFrame:
    """`dmesg -T` stamp "[Sun Nov 29 01:49:00 2026] " (day space-padded or two digits)."""
    raw = pl.col("raw")
    return lf.with_columns(
        _dt_mon=raw.str.slice(5, 3), _dt_day=raw.str.slice(9, 2).str.strip_chars_start(" "),
        _dt_time=raw.str.slice(12, 8), _dt_year=raw.str.slice(21, 4), msg=raw.str.slice(26 + _at(26, " ")),
    )


@dataclass(frozen=True)
class _Shape:
    fits: str  # anchored at the line's start, no captures
    steps: tuple[Callable[[pl.LazyFrame], pl.LazyFrame], ...]  # add the decoration columns, `msg` last
    # reads the fitting lines it can with numpy (fixed_positions.py): their columns, and which lines it read
    read: Callable[[pl.DataFrame], tuple[pl.DataFrame, pl.Series]] | None = None


FORMATS: dict[str, tuple[_Shape, ...]] = {
    # srun --label application log: Megatron/Python stamps, torchrun glog lines, NCCL debug lines
    "srun": (
        _Shape(rf"{_LABEL}{_PY_STAMP}{_PLAIN}", (_srun_label, _cut_py_stamp), read_srun_stamped),
        _Shape(rf"{_LABEL}{_PY_STAMP}{_NCCL}", (_srun_label, _cut_py_stamp, _nccl_prefix)),
        _Shape(rf"{_LABEL}{_RANK_GLOG}{_PLAIN_AFTER_GLOG}", (_srun_label, _cut_rank_glog), read_rank_glog),
        _Shape(rf"{_LABEL}{_NCCL}", (_srun_label, _body_msg, _nccl_prefix)),
    ),
    # RFC 3164 syslog of the kernel with its dmesg stamp
    "syslog_kernel": (
        _Shape(rf"{_MON} (?: \d|\d\d) {_HMS} [\w.-]+ kernel: \[ *\d+\.\d+\] ?{_PLAIN}", (_syslog_kernel,),
               read_syslog_kernel),
    ),
    "dmesg_t": (_Shape(rf"\[{_DOW} {_MON} (?: \d|\d\d) {_HMS} \d{{4}}\] ?{_PLAIN}", (_dmesg_t,)),),
}
_SAMPLE_LINES = 32
_SAMPLE_BYTES = 64 * 1024
# Detection reads a few lines once per file, where a polars call's fixed cost (~0.1 ms a regex) would outweigh the
# work: the same patterns, compiled once by Python's re (ASCII classes, as "(?-u)" gives polars).
_DETECT = {name: tuple(re.compile(s.fits, re.ASCII) for s in shapes) for name, shapes in FORMATS.items()}


def _fits(shape: _Shape) -> pl.Expr:
    return pl.col("raw").str.contains(f"(?-u)^(?:{shape.fits})")


def sample_lines(chunk: bytes) -> list[str]:
    """The first lines of a file's first chunk, cut as ``lines.split_chunks`` cuts them, for ``detect_format``."""
    head = chunk[:_SAMPLE_BYTES].split(b"\n", _SAMPLE_LINES)[:_SAMPLE_LINES]
    return [line.decode("utf-8", "replace").rstrip("\r\n") for line in head]


def detect_format(lines: Sequence[str]) -> str | None:
    """The format whose shapes fit most of `lines` (at least half of those not empty), or None."""
    lines = [line for line in lines if line]
    fitting = {name: sum(any(p.match(line) for p in patterns) for line in lines) for name, patterns in _DETECT.items()}
    best = max(fitting, key=lambda name: fitting[name])
    return best if lines and 2 * fitting[best] >= len(lines) else None


def read_fixed_formats(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split `lines` (``_row``, ``raw``, ``_format`` and any other columns) into the decoration columns that the
    shapes of their files' formats read (``_row`` and the columns some shape sets) and the lines no shape reads
    (without ``_format``). Each shape is tried on the lines of its format that no earlier shape took."""
    types = _decoration_types()
    read, rest = [], [lines.filter(pl.col("_format").is_null())]
    for (name,), part in lines.filter(pl.col("_format").is_not_null()).partition_by("_format", as_dict=True).items():
        for shape in FORMATS[name]:
            if not part.height:
                break
            fits = part.select(_fits(shape)).to_series()
            if fits.any():
                read.extend(_read_shape(shape, part.filter(fits).select("_row", "raw"), types))
                part = part.filter(~fits)
        rest.append(part)
    read_columns = pl.concat(read, how="diagonal") if read else pl.DataFrame(schema={"_row": pl.UInt32})
    return read_columns, pl.concat(rest).drop("_format")


def _read_shape(shape: _Shape, fitting: pl.DataFrame, types: dict[str, pl.DataType]) -> Iterator[pl.DataFrame]:
    """The decoration columns of the lines `fitting` the shape: numpy reads those it can, polars cuts the others."""
    if shape.read is not None:
        positioned, taken = shape.read(fitting)
        yield positioned
        fitting = fitting.filter(~taken)
    if fitting.height:
        lf = fitting.lazy()
        for step in shape.steps:
            lf = step(lf)
        found = [c for c in lf.collect_schema() if c in types]
        yield lf.select("_row", *(pl.col(c).cast(types[c]) for c in found)).collect()


def strip_by_format(lines: pl.DataFrame, hosts: Sequence[str] = ()) -> pl.DataFrame:
    """``strip_decorations`` of `lines` (with ``_format``, dropped; `hosts` as there): the lines of known formats
    cut at fixed positions, the others by ``strip_decorations``. Only the decoration columns some line has are put back in line
    order; the input columns keep theirs."""
    types = _decoration_types()
    lines = lines.with_row_index("_row")
    read, rest = read_fixed_formats(lines)
    parts = [read]
    if rest.height:
        general = strip_decorations(rest.lazy(), hosts).collect()
        parts.append(general.select("_row", *(c for c in general.columns if c in types
                                              and general.get_column(c).null_count() < general.height)))
    found = pl.concat(parts, how="diagonal").sort("_row").drop("_row")
    return lines.drop("_row", "_format").hstack(found).select(
        pl.all().exclude(*types),
        *(pl.col(c) if c in found.columns else pl.lit(None, dtype).alias(c) for c, dtype in types.items()),
    )


@cache
def _decoration_types() -> dict[str, pl.DataType]:
    """The columns ``strip_decorations`` adds, in its order, with their types, and the stamp read at fixed positions."""
    schema = strip_decorations(pl.LazyFrame(schema={"raw": pl.String})).collect_schema()
    read = {READ_LOCAL_US: pl.Int64, READ_MONTH: pl.Int64, READ_DAY: pl.Int64, READ_TIME_US: pl.Int64, READ_MONO: pl.Float64}
    return {**{c: t for c, t in schema.items() if c != "raw"}, **read}
