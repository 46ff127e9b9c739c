"""Turn the stamp parts left by ``decorations.strip_decorations`` into UTC timestamps (DESIGN.md §2, ``ts_quality``).

``parse_timestamps`` works on whole columns. Dates are computed with integer arithmetic (days since the epoch), so an
impossible date (Feb 30, Feb 29 of a common year) becomes null instead of raising. When a line carries several wall
clocks, the most complete one wins: a zoned ISO stamp, then a full local date, then a year-less stamp.
``anchor_files`` (``anchor_file_clock`` for one file) then runs per batch of files, each in line order: it turns
monotonic seconds into wall time with the node's boot time and lets stamp-less lines inherit the previous stamp; only a
small ``FileClock`` per file is carried from one batch to the next.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from firstfault.transforms.decorations import STAMP_COLUMNS

_US_PER_SECOND = 1_000_000
_US_PER_DAY = 86_400 * _US_PER_SECOND
_MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}
_DAYS_IN_MONTH = dict(enumerate((31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), 1))
_DAYS_BEFORE_MONTH = {m: sum(_DAYS_IN_MONTH[k] for k in range(1, m)) for m in _DAYS_IN_MONTH}
_UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "UCT"}  # no conversion needed
_FAR = 2**62  # distance of an impossible candidate date


@dataclass(frozen=True)
class _Form:
    """Where one stamp form left its parts (column names of strip_decorations)."""

    quality: str
    time: str  # "HH:MM:SS"; set exactly when the form matched
    date: str | None = None  # "YYYY-MM-DD"
    year: str | None = None
    month_name: str | None = None
    day: str | None = None
    month_day: str | None = None  # glog "MMDD", PyTorch "MDD"
    frac: str | None = None  # digits after the decimal separator
    offset: str | None = None  # "Z", "+0000", "+00:00"


# Most complete first: it wins on a line that carries several clocks.
_FORMS = (
    _Form("exact", "_iso_time", date="_iso_date", frac="_iso_frac", offset="_iso_off"),  # journal, ISO dmesg, Talos
    _Form("local", "_py_time", date="_py_date", frac="_py_frac"),  # Python logging, DeepSpeed, NCCL WARN
    _Form("local", "_dt_time", year="_dt_year", month_name="_dt_mon", day="_dt_day"),  # dmesg -T
    _Form("local", "_fm_time", year="_fm_year", month_name="_fm_mon", day="_fm_day"),  # Fabric Manager
    _Form("local", "_sl_time", date="_sl_date"),  # Slurm
    _Form("local", "_tr_time", date="_tr_date"),  # torchrun failure block
    _Form("year_inferred", "_sy_time", month_name="_sy_mon", day="_sy_day", frac="_sy_frac"),  # syslog
    _Form("year_inferred", "_gl_time", month_day="_gl_md", frac="_gl_frac"),  # glog
    _Form("year_inferred", "_hm_time", month_name="_hm_mon", day="_hm_day"),  # dmesg -H minute stamp
)
_MINUTE_STAMP = len(_FORMS) - 1
# Stamps read at fixed positions (fixed_positions.py) come as numbers: the local wall time of a dated stamp, which
# has the Python form's parts and quality, or the month, day and time of a year-less stamp (syslog, glog), which has
# the syslog form's; and seconds since boot.
READ_LOCAL_US, READ_MONTH, READ_DAY, READ_TIME_US, READ_MONO = "_local_us", "_read_month", "_read_day", "_read_time_us", "_read_mono"
READ_COLUMNS = (READ_LOCAL_US, READ_MONTH, READ_DAY, READ_TIME_US, READ_MONO)
_READ_DATED_FORM = next(i for i, f in enumerate(_FORMS) if f.time == "_py_time")
_READ_YEAR_LESS_FORM = next(i for i, f in enumerate(_FORMS) if f.time == "_sy_time")
_PARTS = ("time", "date", "year", "month_name", "day", "month_day", "frac", "offset")
_INTERNAL_COLUMNS = (
    "_form", *(f"_w_{part}" for part in _PARTS),
    "_year", "_month", "_day", "_time_us", "_offset_us", "_days_before_month", "_days_in_month",
    "_dated", "_candidate_0", "_candidate_1", "_candidate_2", "_wall",
)  # fmt: skip


def _winning_form(forms: list[tuple[int, _Form]]) -> pl.Expr:
    if not forms:
        return pl.lit(None, pl.Int8)
    return pl.coalesce(pl.when(pl.col(f.time).is_not_null()).then(pl.lit(i, pl.Int8)) for i, f in forms)


def _part_of_winner(part: str, forms: list[tuple[int, _Form]]) -> pl.Expr:
    """The text of ``part`` in the winning form (null when that form has no such part)."""
    form = pl.col("_form")
    having = [pl.when(form == i).then(pl.col(getattr(f, part))) for i, f in forms if getattr(f, part)]
    return pl.coalesce(having) if having else pl.lit(None, pl.String)


def _to_int(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.Int64, strict=False)


def _numbers(read_year_less: bool) -> dict[str, pl.Expr]:
    """Year, month, day, time and offset of the winning form: read from its text, or as read at fixed positions."""
    def read(column: str) -> list[pl.Expr]:
        return [pl.col(column)] if read_year_less else []

    date, month_day = pl.col("_w_date"), _to_int(pl.col("_w_month_day"))
    offset = pl.col("_w_offset")
    offset_minutes = _to_int(offset.str.slice(1, 2)) * 60 + _to_int(offset.str.slice(-2))
    seconds = pl.col("_w_time").str.to_time("%H:%M:%S", strict=False).cast(pl.Int64) // 1000
    # any fraction length (ms, µs, ns) becomes µs
    fraction = _to_int(pl.col("_w_frac").str.pad_end(6, "0").str.slice(0, 6)).fill_null(0)
    return {
        "_year": pl.coalesce(_to_int(date.str.slice(0, 4)), _to_int(pl.col("_w_year"))),
        "_month": pl.coalesce(
            *read(READ_MONTH),
            _to_int(date.str.slice(5, 2)),
            pl.col("_w_month_name").replace_strict(_MONTHS, default=None, return_dtype=pl.Int64),
            month_day // 100,  # PyTorch does not zero-pad the month (E321 = March 21); the day has 2 digits
        ),
        "_day": pl.coalesce(*read(READ_DAY), _to_int(date.str.slice(8, 2)), _to_int(pl.col("_w_day")), month_day % 100),
        "_time_us": pl.coalesce(*read(READ_TIME_US), seconds + fraction),
        "_offset_us": (
            pl.when(offset == "Z").then(0)
            .when(offset.str.starts_with("-")).then(-offset_minutes)
            .otherwise(offset_minutes)
            * 60 * _US_PER_SECOND
        ),
    }  # fmt: skip


def _is_leap(year: int | pl.Expr):
    return (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))


def _days_before_year(year: int | pl.Expr):
    """Days from 1970-01-01 to January 1 of ``year`` (an int or an expression; proleptic Gregorian, year >= 1601)."""
    before = year - 1
    return 365 * (year - 1970) + before // 4 - before // 100 + before // 400 - 477  # 477 leap days before 1970


def _wall_us(year: int | pl.Expr) -> pl.Expr:
    """µs since the epoch of ``_month``/``_day``/``_time_us`` in ``year``; null when that date does not exist."""
    leap, month, day = _is_leap(year), pl.col("_month"), pl.col("_day")
    exists = (day >= 1) & (day <= pl.col("_days_in_month") + (leap & (month == 2)))
    days = _days_before_year(year) + pl.col("_days_before_month") + (leap & (month > 2)) + day - 1
    return pl.when(exists).then(days * _US_PER_DAY + pl.col("_time_us"))


_DAYS_IN_MONTH_AT = np.array([0, *_DAYS_IN_MONTH.values()], dtype=np.int64)  # indexed by month 1-12
_DAYS_BEFORE_MONTH_AT = np.array([0, *_DAYS_BEFORE_MONTH.values()], dtype=np.int64)


def local_wall_us(year: np.ndarray, month: np.ndarray, day: np.ndarray, time_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """µs since the epoch of dates and times read as numbers (``_wall_us`` for numpy arrays; month 1-12), and
    whether each date exists."""
    leap = _is_leap(year)
    exists = (day >= 1) & (day <= _DAYS_IN_MONTH_AT[month] + (leap & (month == 2)))
    days = _days_before_year(year) + _DAYS_BEFORE_MONTH_AT[month] + (leap & (month > 2)) + day - 1
    return days * _US_PER_DAY + time_us, exists


def _nearest_to_window(start_us: int | pl.Expr, end_us: int | pl.Expr) -> pl.Expr:
    """The candidate year that puts a year-less stamp nearest the window (0 inside it); ties keep the window's year."""
    same, previous, following = (pl.col(f"_candidate_{i}") for i in range(3))
    d_same, d_previous, d_following = (
        ((start_us - c).clip(lower_bound=0) + (c - end_us).clip(lower_bound=0)).fill_null(_FAR)
        for c in (same, previous, following)
    )
    return (
        pl.when((d_same <= d_previous) & (d_same <= d_following)).then(same)
        .when(d_previous <= d_following).then(previous)
        .otherwise(following)
    )  # fmt: skip


def _naive_us(t: datetime) -> int:
    return (t - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def _local_to_utc(naive: pl.Expr, tz: str) -> pl.Expr:
    if tz in _UTC_NAMES:
        return naive

    def convert(expr: pl.Expr) -> pl.Expr:
        return (
            expr.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
            .dt.convert_time_zone("UTC")
            .dt.replace_time_zone(None)
        )

    # A wall time inside a DST gap does not exist; read it as if the clock had already moved forward.
    return pl.coalesce(convert(naive), convert(naive + pl.duration(hours=1)))


def local_window(t: datetime, tz: str) -> datetime:
    """An attempt-window bound (naive = UTC, or aware) as naive wall time in ``tz``."""
    aware = t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t
    return aware.astimezone(ZoneInfo(tz)).replace(tzinfo=None)


def parse_timestamps(lf: pl.LazyFrame, *, tz: str, window_start: datetime | pl.Expr, window_end: datetime | pl.Expr,
                     present: Collection[str] | None = None) -> pl.LazyFrame:
    """Add ``ts`` (UTC, naive µs), ``ts_quality``, ``mono_s`` and ``chain_s`` (dmesg -H: 0 on a minute stamp, the
    seconds since the previous message on a "+seconds" line; ``anchor_file_clock`` chains them); drop the stamp
    parts of ``strip_decorations``.

    The attempt window (for year-less stamps) is two datetimes, or, when the lines of several attempts are parsed
    in one frame, two expressions giving each line's window as wall time in ``tz`` (``local_window``).

    `present`: the stamp columns that hold a value on some line (None: any may); the forms of the others are not
    computed (a batch of one format has one or two of the nine)."""
    forms = [(i, f) for i, f in enumerate(_FORMS) if present is None or f.time in present]
    year_less = any(f.date is None and f.year is None for _, f in forms)
    read = present is not None and READ_LOCAL_US in present
    read_year_less = present is not None and READ_TIME_US in present
    year_less |= read_year_less
    read_form = ([pl.when(pl.col(READ_LOCAL_US).is_not_null()).then(pl.lit(_READ_DATED_FORM, pl.Int8))] * read
                 + [pl.when(pl.col(READ_TIME_US).is_not_null()).then(pl.lit(_READ_YEAR_LESS_FORM, pl.Int8))] * read_year_less)
    window: dict[str, pl.Expr] = {}
    if isinstance(window_start, pl.Expr):  # materialised once: every candidate year reads them
        window = {"_win_start": window_start.dt.epoch("us"), "_win_end": window_end.dt.epoch("us"),
                  "_win_year": window_start.dt.year().cast(pl.Int64)}
        start_us, end_us, year = pl.col("_win_start"), pl.col("_win_end"), pl.col("_win_year")
    else:
        local_start, local_end = local_window(window_start, tz), local_window(window_end, tz)
        start_us, end_us, year = _naive_us(local_start), _naive_us(local_end), local_start.year
    month = pl.col("_month")
    form_quality = pl.col("_form").replace_strict(
        {i: f.quality for i, f in enumerate(_FORMS)}, default=None, return_dtype=pl.String
    )
    wall = pl.col("_wall").cast(pl.Datetime("us"))
    is_exact = pl.col("_form") == 0
    since_boot = pl.when(pl.col("_delta").is_null()).then(pl.col("_mono").cast(pl.Float64, strict=False))
    read_mono = [pl.col(READ_MONO)] if present is not None and READ_MONO in present else []
    mono_s = pl.coalesce(*read_mono, since_boot, _to_int(pl.col("_kmsg_us")) / _US_PER_SECOND)
    chain_s = (
        pl.when(pl.col("_delta").is_not_null()).then(pl.col("_mono").cast(pl.Float64, strict=False))
        .when(pl.col("_form") == _MINUTE_STAMP).then(pl.lit(0.0))
    )  # fmt: skip
    # Stages materialise values used several times: polars would compute a repeated expression again.
    lf = (
        lf.with_columns(_hm_time=pl.col("_hm_time") + ":00", **window)  # minute resolution
        .with_columns(_form=pl.coalesce(*read_form, _winning_form(forms)))
        .with_columns(**{f"_w_{part}": _part_of_winner(part, forms) for part in _PARTS})
        .with_columns(**_numbers(read_year_less))
        .with_columns(
            _days_before_month=month.replace_strict(_DAYS_BEFORE_MONTH, default=None, return_dtype=pl.Int64),
            _days_in_month=month.replace_strict(_DAYS_IN_MONTH, default=None, return_dtype=pl.Int64),
        )
        .with_columns(
            _dated=_wall_us(pl.col("_year")),
            **{f"_candidate_{i}": _wall_us(y) for i, y in enumerate((year, year - 1, year + 1)) if year_less},
        )
        .with_columns(
            # without a year-less form, a line without a year has no form, hence no wall time
            _wall=pl.coalesce(
                *[pl.col(READ_LOCAL_US)] * read,
                pl.when(pl.col("_year").is_not_null()).then(pl.col("_dated")).otherwise(_nearest_to_window(start_us, end_us))
                if year_less else pl.col("_dated"),
            ) - pl.col("_offset_us").fill_null(0),
            mono_s=mono_s,
            chain_s=chain_s,
        )
        .with_columns(
            ts=pl.when(is_exact).then(wall).otherwise(_local_to_utc(wall, tz)),
            ts_quality=pl.when(pl.col("_wall").is_not_null())
            .then(form_quality)
            .when(pl.col("mono_s").is_not_null() | pl.col("_delta").is_not_null())
            .then(pl.lit("monotonic"))
            .otherwise(pl.lit("none")),
        )
        .drop(*_INTERNAL_COLUMNS, *STAMP_COLUMNS, *READ_COLUMNS, *window, strict=False)
    )
    seconds_since_boot = present is None or not {"_mono", "_kmsg_us", READ_MONO}.isdisjoint(present)
    return _kernel_wall_records(lf) if seconds_since_boot else lf


# The kernel's own records of wall time, in a log stamped with seconds since boot only (raw dmesg): an audit record's
# `audit(<epoch>.<ms>:<serial>)` and the RTC driver's `setting system clock to … UTC (<epoch>)` at boot (kernel/audit.c
# audit_log_start, drivers/rtc/class.c rtc_hctosys).
_AUDIT_EPOCH = r"audit\((\d{9,10}\.\d{3}):\d+\)"
_RTC_EPOCH = r"setting system clock to \S+ UTC \((\d{9,10})\)"


def _kernel_wall_records(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Give such a record's line the wall time it prints, when it has none but seconds since boot: ``anchor_files``
    then infers its boot's time from it and dates every other line of that boot (``boot_anchored``)."""
    epoch = pl.coalesce(pl.col("msg").str.extract(_AUDIT_EPOCH, 1), pl.col("msg").str.extract(_RTC_EPOCH, 1)).cast(pl.Float64, strict=False)
    recorded = pl.col("ts").is_null() & pl.col("mono_s").is_not_null() & pl.col("_epoch").is_not_null()
    return lf.with_columns(_epoch=epoch).with_columns(
        ts=pl.when(recorded).then(pl.from_epoch((pl.col("_epoch") * _US_PER_SECOND).cast(pl.Int64), time_unit="us")).otherwise(pl.col("ts")),
        ts_quality=pl.when(recorded).then(pl.lit("exact")).otherwise(pl.col("ts_quality")),
    ).drop("_epoch")


@dataclass
class FileClock:
    """What one batch of a file tells the next: the node's boot time and the last stamp seen (naive UTC)."""

    boot_time: datetime | None = None
    last_ts: datetime | None = None
    chain_ts: datetime | None = None  # stamp of the last message of a dmesg -H chain that reaches the batch's end
    last_mono: float | None = None  # the last seconds-since-boot seen: a drop from it is a reboot


def anchor_file_clock(df: pl.DataFrame, clock: FileClock) -> tuple[pl.DataFrame, FileClock]:
    """Give monotonic lines a wall time from the boot time and stamp-less lines the previous stamp of the file.

    ``df`` is one batch of one file in line order, after ``parse_timestamps`` (``anchor_files`` for one file).
    """
    frame, clocks = anchor_files(df.with_columns(_anchor_file=pl.lit(0, pl.Int32)), {0: clock}, file="_anchor_file")
    return frame.drop("_anchor_file"), clocks[0]


def anchor_files(df: pl.DataFrame, clocks: dict[int, FileClock], file: str = "_file") -> tuple[pl.DataFrame, dict[int, FileClock]]:
    """Anchor a batch of several files at once (each one's lines together, in line order, told apart by the ``file``
    column); ``clocks`` holds each file's clock before the batch (missing = a fresh one). Returns the frame in the
    same order and every file's clock after it. Per file, in this order: boots split where seconds since boot drop,
    each boot's time given (the one the file starts in) or inferred (median of wall − since-boot) and its monotonic
    lines anchored to it; dmesg -H "+seconds" lines chained from their minute stamp; stamp-less lines inheriting the
    previous stamp."""
    clocks = {**{i: FileClock() for i in df.get_column(file).unique().to_list()}, **clocks}
    if df.height == 0:
        return df, clocks
    given = {i: _naive_utc(c.boot_time) for i, c in clocks.items() if c.boot_time is not None}
    if df.get_column("mono_s").null_count() < df.height:
        df = _anchor_boots(df, clocks, given, file)
    else:  # no seconds since boot (most batches): no boot to split, infer or anchor to
        df = df.with_columns(boot=_per_file(file, given, pl.Datetime("us")), _boot=pl.lit(0, pl.Int64))
    df = _chain_deltas(df, clocks, file)
    last_ts = {i: _naive_utc(c.last_ts) for i, c in clocks.items() if c.last_ts is not None}
    previous = pl.col("ts").forward_fill().over(file)
    if last_ts:
        previous = previous.fill_null(_per_file(file, last_ts, pl.Datetime("us")))
    inherits = pl.col("ts_quality").eq("none") & previous.is_not_null()
    df = df.with_columns(
        ts=pl.when(inherits).then(previous).otherwise(pl.col("ts")),
        ts_quality=pl.when(inherits).then(pl.lit("inherited")).otherwise(pl.col("ts_quality")),
    )
    ends = df.group_by(file).agg(
        last_ts=pl.col("ts").drop_nulls().last(), last_mono=pl.col("mono_s").drop_nulls().last(),
        boot=pl.col("boot").sort_by("_boot").last(),
        # a chain that reaches the batch's end goes on in the next batch of the file
        chain_ts=pl.when(pl.col("chain_s").last().is_not_null()).then(pl.col("ts").last()),
    )
    out = dict(clocks)
    for i, ts, mono, boot, chain_ts in ends.select(file, "last_ts", "last_mono", "boot", "chain_ts").iter_rows():
        clock = clocks[i]
        out[i] = FileClock(boot_time=boot, last_ts=ts if ts is not None else clock.last_ts, chain_ts=chain_ts,
                           last_mono=mono if mono is not None else clock.last_mono)
    return df.drop("_boot", "boot"), out


def _anchor_boots(df: pl.DataFrame, clocks: dict[int, FileClock], given: dict[int, datetime], file: str) -> pl.DataFrame:
    """Add `_boot` (which boot of its file a line belongs to: seconds since boot dropping starts a new one) and
    `boot` (that boot's time: `given` for the boot a file starts in, else inferred), and anchor monotonic lines."""
    last_mono = {i: c.last_mono for i, c in clocks.items() if c.last_mono is not None}
    mono = pl.col("mono_s")
    previous_mono = mono.forward_fill().shift(1).over(file)
    if last_mono:
        previous_mono = previous_mono.fill_null(_per_file(file, last_mono, pl.Float64))
    df = df.with_columns(_boot=(mono < previous_mono - _REBOOT_DROP_S).fill_null(False).cum_sum().over(file).cast(pl.Int64))
    inferred = (
        df.filter(pl.col("ts").is_not_null() & mono.is_not_null())
        .select(file, "_boot", boot=pl.col("ts") - _since_boot())
        .group_by(file, "_boot").agg(pl.col("boot").sort().gather(pl.len() // 2).first())
    )
    boots = (
        df.select(file, "_boot").unique().join(inferred, on=[file, "_boot"], how="left")
        .with_columns(boot=pl.when((pl.col("_boot") == 0) & pl.col(file).is_in(list(given)))
                      .then(_per_file(file, given, pl.Datetime("us"))).otherwise(pl.col("boot")))
    )
    df = df.join(boots, on=[file, "_boot"], how="left", maintain_order="left")
    quality = pl.col("ts_quality")
    anchored = quality.eq("monotonic") & mono.is_not_null() & pl.col("boot").is_not_null()
    return df.with_columns(
        ts=pl.when(anchored).then(pl.col("boot") + _since_boot()).otherwise(pl.col("ts")),
        ts_quality=pl.when(anchored).then(pl.lit("boot_anchored")).otherwise(quality),
    )


def _chain_deltas(df: pl.DataFrame, clocks: dict[int, FileClock], file: str) -> pl.DataFrame:
    """dmesg -H: a minute stamp starts a chain and each "+seconds" line after it is the previous message plus its
    seconds. Any other line ends the chain; a "+seconds" line outside a chain keeps no wall time. A file's first
    lines continue the chain its previous batch ended in (its clock's `chain_ts`)."""
    carried = {i: _naive_utc(c.chain_ts) for i, c in clocks.items() if c.chain_ts is not None}
    if not carried and df.get_column("chain_s").null_count() == df.height:
        return df  # no dmesg -H lines: most files
    chained, ts = pl.col("chain_s").is_not_null(), pl.col("ts")
    head_ts = pl.when(chained & ts.is_not_null()).then(ts)
    segment = [file, "_segment"]
    # segment 0 of a file: the lines that continue the previous batch's chain
    df = df.with_columns(_segment=(~chained | ts.is_not_null()).cum_sum().over(file)).with_columns(
        _base=pl.when(pl.col("_segment") == 0)
        .then(_per_file(file, carried, pl.Datetime("us")))
        .otherwise(head_ts.first().over(segment)),
        _offset=pl.col("chain_s").cum_sum().over(segment),
    )
    follows = chained & ts.is_null() & pl.col("_base").is_not_null()
    offset = pl.duration(microseconds=(pl.col("_offset") * _US_PER_SECOND).round().cast(pl.Int64))
    return df.with_columns(
        ts=pl.when(follows).then(pl.col("_base") + offset).otherwise(ts),
        ts_quality=pl.when(follows).then(pl.lit("year_inferred")).otherwise(pl.col("ts_quality")),
    ).drop("_segment", "_base", "_offset")


def _per_file(file: str, values: dict[int, Any], dtype: pl.DataType) -> pl.Expr:
    return pl.col(file).replace_strict(values, default=None, return_dtype=dtype)


_REBOOT_DROP_S = 1.0  # seconds since boot going back by more than this (printk order across CPUs is far tighter)


def _since_boot() -> pl.Expr:
    return pl.duration(microseconds=(pl.col("mono_s") * _US_PER_SECOND).round().cast(pl.Int64))


def _naive_utc(t: datetime) -> datetime:
    return t if t.tzinfo is None else t.astimezone(timezone.utc).replace(tzinfo=None)
