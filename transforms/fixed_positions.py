"""Read the decorations of lines of one known shape with numpy, at fixed positions of each line's first bytes.

The lines come as a polars string column; its Arrow views are read in place (no copy of the text), the first bytes of
every line (as many as the shape's decorations take) gathered into one matrix, and each field read from its columns
in one vectorized step. Only lines whose fields all lie within that head are read here; ``fixed_formats`` cuts the
others with polars. Numbers are read digit by digit from the columns, so a value is exactly what its text says.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from firstfault.transforms.timestamps import READ_DAY, READ_MONO, READ_MONTH, READ_TIME_US, local_wall_us

_INLINE = 12  # an Arrow string view holds a string of up to 12 bytes itself
# the bytes each shape reads: its decorations as most lines have them, the cost of the read growing with it
_SRUN_STAMPED_BYTES, _SYSLOG_BYTES, _RANK_GLOG_BYTES = 48, 64, 96
_COLON, _SPACE, _ZERO, _DOT, _CLOSE = ord(":"), ord(" "), ord("0"), ord("."), ord("]")
_MONTH_KEYS = np.array([int.from_bytes(m.encode(), "big") for m in
                        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")])
_MONTH_ORDER = np.argsort(_MONTH_KEYS)
_EXACT_DIGITS = 15  # a decimal of up to 15 digits is an exact float64 numerator: its quotient is correctly rounded


def line_heads(raw: pl.Series, width: int) -> np.ndarray:
    """The first `width` bytes of each string of `raw` (no nulls), zero past its end: an n x `width` matrix.
    Each line's head is copied whole from the Arrow buffer that holds it (the column's views are read in place)."""
    views = raw.rechunk().to_arrow(compat_level=pl.CompatLevel.newest())
    view = np.frombuffer(views.buffers()[1], dtype=np.int32).reshape(-1, 4)[views.offset:views.offset + len(views)]
    lengths = view[:, 0]
    heads = np.zeros((len(view), width), dtype=np.uint8)
    inline = lengths <= _INLINE
    heads[inline, :_INLINE] = view[inline].view(np.uint8)[:, 4:]
    holder = np.where(inline, -1, view[:, 2])
    by_holder = np.argsort(holder, kind="stable")
    bounds = np.cumsum(np.bincount(holder + 1, minlength=len(views.buffers()) - 1))
    for index, buffer in enumerate(views.buffers()[2:]):
        rows = by_holder[bounds[index]:bounds[index + 1]]
        if len(rows):
            heads[rows] = _heads_in(np.frombuffer(buffer, dtype=np.uint8), view[rows, 3].astype(np.int64), width)
    short = np.flatnonzero(lengths < width)
    heads[short] *= np.arange(width) < lengths[short, None]
    return heads


def _heads_in(data: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """The `width` bytes of `data` from each of `starts`, each copied as one fixed-size item; those that would
    run past its end read a zero-padded copy of its last bytes."""
    item = np.dtype((np.void, width))
    tail_start = max(len(data) - width, 0)
    tail = np.concatenate([data[tail_start:], np.zeros(width, dtype=np.uint8)])
    heads = np.empty(len(starts), dtype=item)
    near_end = starts >= tail_start  # all of them when the buffer is shorter than `width`
    for source, first, taken in ((data, 0, ~near_end), (tail, tail_start, near_end)):
        if taken.any():
            windows = np.ndarray((len(source) - width + 1,), dtype=item, buffer=source, strides=(1,))
            heads[taken] = windows[starts[taken] - first]
    return heads.view(np.uint8).reshape(-1, width)


def _decimal(heads: np.ndarray, first: np.ndarray | int, width: int) -> np.ndarray:
    """The number of `width` digits from column `first` of each row (one number, or one per row: the rows of each
    distinct column are read together, a file's lines having a few); a byte that is no digit (a padding space, the
    text before a number) or a column before the line's start counts as 0."""
    if np.isscalar(first):
        return _decimal_at(heads, slice(None), int(first), width)
    offset = int(first.min(initial=0))
    columns = np.flatnonzero(np.bincount(first - offset)) + offset
    if len(columns) == 1:
        return _decimal_at(heads, slice(None), int(columns[0]), width)
    value = np.empty(len(heads), dtype=np.int64)
    for column in columns:
        rows = np.flatnonzero(first == column)
        value[rows] = _decimal_at(heads, rows, int(column), width)
    return value


def _decimal_at(heads: np.ndarray, rows: np.ndarray | slice, first: int, width: int) -> np.ndarray:
    """`_decimal` of the `rows` of `heads` from the one column `first`, gathering only the digits' columns."""
    value = np.zeros(len(heads) if isinstance(rows, slice) else len(rows), dtype=np.int64)
    for column in range(max(first, 0), first + width):
        digit = heads[rows, column].astype(np.int64) - _ZERO
        value = value * 10 + np.where(digit <= 9, np.maximum(digit, 0), 0)
    return value


def read_srun_stamped(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Lines of the shape "<padded srun label>: [ ][YYYY-MM-DD HH:MM:SS] <message>" (the shape's regex checked
    already): `_row`, `srun_label`, `_local_us` (the stamp as µs since the epoch in local time, null on a date that
    does not exist) and `msg`, for the lines whose stamp lies within the head; and the mask of those lines."""
    heads = line_heads(lines.get_column("raw"), _SRUN_STAMPED_BYTES)
    colon = np.argmax(heads == _COLON, axis=1)
    after = heads[np.arange(len(heads)), np.minimum(colon + 2, _SRUN_STAMPED_BYTES - 1)]
    stamp = colon + 2 + (after == _SPACE)  # the stamp's "["
    within = (colon >= 1) & (stamp + 21 <= _SRUN_STAMPED_BYTES)
    heads, colon, stamp = heads[within], colon[within], stamp[within]
    label = _decimal(heads, colon - 7, 7)  # the up to 7 digits before the colon, after padding spaces
    date = stamp + 1  # "YYYY-MM-DD HH:MM:SS"
    seconds = _decimal(heads, date + 11, 2) * 3600 + _decimal(heads, date + 14, 2) * 60 + _decimal(heads, date + 17, 2)
    wall, exists = local_wall_us(_decimal(heads, date, 4), _decimal(heads, date + 5, 2), _decimal(heads, date + 8, 2),
                                 seconds * 1_000_000)
    mask = pl.Series(within)
    read = lines.filter(mask).select(
        "_row",
        srun_label=pl.lit(pl.Series(label, dtype=pl.Int32)),
        _local_us=pl.when(pl.lit(pl.Series(exists))).then(pl.lit(pl.Series(wall, dtype=pl.Int64))),
        msg=pl.col("raw").str.slice(pl.lit(pl.Series(stamp + 22, dtype=pl.Int64))),
    )
    return read, mask


def read_syslog_kernel(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Lines of the shape "Mon DD HH:MM:SS <host> kernel: [ *<seconds since boot>] <message>" (the shape's regex
    checked already): `_row`, `syslog_host`, the year-less stamp's month, day and time (`_read_month`, `_read_day`,
    `_read_time_us`), the seconds since boot (`_read_mono`) and `msg`, for the lines whose seconds since boot end
    within the head and have at most 15 digits; and the mask of those lines."""
    heads = line_heads(lines.get_column("raw"), _SYSLOG_BYTES)
    host_end = 16 + np.argmax(heads[:, 16:] == _SPACE, axis=1)  # the host has no space: " kernel: [" follows it
    opening = host_end + 9
    stamp_width = 24
    found = (heads[np.arange(len(heads)), host_end] == _SPACE) & (opening + 1 + stamp_width <= _SYSLOG_BYTES)
    heads, host_end, opening = heads[found], host_end[found], opening[found]
    stamp = np.stack([heads[np.arange(len(heads)), opening + 1 + k] for k in range(stamp_width)], axis=1)  # " *digits.digits]..."
    close = np.argmax(stamp == _CLOSE, axis=1)
    dot = np.argmax(stamp == _DOT, axis=1)
    value = np.zeros(len(heads), dtype=np.int64)
    digits = np.zeros(len(heads), dtype=np.int64)
    for k in range(stamp_width):
        digit = stamp[:, k].astype(np.int64) - _ZERO
        is_digit = (k < close) & (digit >= 0) & (digit <= 9)
        value = np.where(is_digit, value * 10 + digit, value)
        digits += is_digit
    closed = (stamp[np.arange(len(stamp)), close] == _CLOSE) & (digits <= _EXACT_DIGITS) & (opening + close + 2 < _SYSLOG_BYTES)
    within = np.zeros(len(found), dtype=bool)
    within[np.flatnonzero(found)[closed]] = True
    heads, host_end, opening, close, dot, value = (a[closed] for a in (heads, host_end, opening, close, dot, value))
    end = opening + 1 + close  # the "]"
    message = end + 1 + (heads[np.arange(len(heads)), end + 1] == _SPACE)
    month = _MONTH_ORDER[np.searchsorted(_MONTH_KEYS[_MONTH_ORDER], heads[:, 0].astype(np.int64) << 16
                                         | heads[:, 1].astype(np.int64) << 8 | heads[:, 2])] + 1
    seconds = _decimal(heads, 7, 2) * 3600 + _decimal(heads, 10, 2) * 60 + _decimal(heads, 13, 2)
    mask = pl.Series(within)
    read = lines.filter(mask).select(
        "_row",
        syslog_host=pl.col("raw").str.slice(16, pl.lit(pl.Series(host_end - 16, dtype=pl.Int64))),
        **{READ_MONTH: pl.lit(pl.Series(month, dtype=pl.Int64)), READ_DAY: pl.lit(pl.Series(_decimal(heads, 4, 2))),
           READ_TIME_US: pl.lit(pl.Series(seconds * 1_000_000)),
           READ_MONO: pl.lit(pl.Series(value / 10.0 ** (close - dot - 1)))},
        msg=pl.col("raw").str.slice(pl.lit(pl.Series(message, dtype=pl.Int64))),
    )
    return read, mask


def _first(heads: np.ndarray, byte: int, start: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """The first column at or after `start` holding `byte` in each row, and whether there is one."""
    at = np.argmax((heads == byte) & (np.arange(heads.shape[1]) >= np.reshape(start, (-1, 1))), axis=1)
    return at, heads[np.arange(len(heads)), at] == byte


def read_rank_glog(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Lines of the shape "<srun label>: [rankN]:[ ][<level>MMDD HH:MM:SS.<6 or 9 digits> <file:line>] <message>"
    (the shape's regex checked already; PyTorch's month has 3 or 4 digits): `_row`, `srun_label`, `rank_prefix`, the
    year-less stamp's month, day and time (`_read_month`, `_read_day`, `_read_time_us`) and `msg`, for the lines
    whose stamp's closing bracket lies within the head; and the mask of those lines."""
    heads = line_heads(lines.get_column("raw"), _RANK_GLOG_BYTES)

    def at(columns: np.ndarray) -> np.ndarray:  # the bytes at columns that may lie past the head (then 0)
        return np.where(columns < _RANK_GLOG_BYTES, heads[np.arange(len(heads)), np.minimum(columns, _RANK_GLOG_BYTES - 1)], 0)

    colon = np.argmax(heads == _COLON, axis=1)
    rank_end, _ = _first(heads, _CLOSE, 0)  # the label has no "]": the first one closes "[rankN"
    glog = rank_end + 2 + (at(rank_end + 2) == _SPACE)  # the stamp's "["
    month_day_width = 4 - (at(glog + 5) == _SPACE)
    time = glog + 3 + month_day_width
    fraction_width = 6 + 3 * (at(time + 15) != _SPACE)
    close, closed = _first(heads, _CLOSE, np.minimum(time + 9 + fraction_width, _RANK_GLOG_BYTES))
    within = closed & (time + 15 < _RANK_GLOG_BYTES) & (close + 1 < _RANK_GLOG_BYTES)
    heads, colon, rank_end, glog, month_day_width, time, close = (
        a[within] for a in (heads, colon, rank_end, glog, month_day_width, time, close))
    label = _decimal(heads, colon - 7, 7)  # the up to 7 digits before the colon
    rank = _decimal(heads, rank_end - 7, 7)  # the up to 7 digits before "]", after "[rank"
    # "MDD" read as 4 digits from the level letter (read as 0), "MMDD" from where it starts
    month_day = _decimal(heads, glog + month_day_width - 2, 4)
    first = time
    seconds = _decimal(heads, first, 2) * 3600 + _decimal(heads, first + 3, 2) * 60 + _decimal(heads, first + 6, 2)
    time_us = seconds * 1_000_000 + _decimal(heads, first + 9, 6)
    message = close + 1 + (heads[np.arange(len(heads)), np.minimum(close + 1, _RANK_GLOG_BYTES - 1)] == _SPACE)
    mask = pl.Series(within)
    read = lines.filter(mask).select(
        "_row",
        srun_label=pl.lit(pl.Series(label, dtype=pl.Int32)), rank_prefix=pl.lit(pl.Series(rank, dtype=pl.Int32)),
        **{READ_MONTH: pl.lit(pl.Series(month_day // 100)), READ_DAY: pl.lit(pl.Series(month_day % 100)),
           READ_TIME_US: pl.lit(pl.Series(time_us))},
        msg=pl.col("raw").str.slice(pl.lit(pl.Series(message, dtype=pl.Int64))),
    )
    return read, mask
