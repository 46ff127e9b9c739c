"""Read the decorations of lines of one known shape with numpy, at fixed positions of each line's first bytes.

The lines come as a polars string column; its Arrow views are read in place (no copy of the text), the first
``HEAD_BYTES`` of every line gathered into one matrix, and each field read from its columns in one vectorized step.
Only lines whose fields all lie within that head are read here; ``fixed_formats`` cuts the others with polars.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from firstfault.transforms.timestamps import READ_DAY, READ_MONO, READ_MONTH, READ_TIME_US, local_wall_us

HEAD_BYTES = 64
_INLINE = 12  # an Arrow string view holds a string of up to 12 bytes itself
_COLON, _SPACE, _ZERO, _DOT, _CLOSE = ord(":"), ord(" "), ord("0"), ord("."), ord("]")
_MONTH_KEYS = np.array([int.from_bytes(m.encode(), "big") for m in
                        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")])
_MONTH_ORDER = np.argsort(_MONTH_KEYS)
_EXACT_DIGITS = 15  # a decimal of up to 15 digits is an exact float64 numerator: its quotient is correctly rounded


def line_heads(raw: pl.Series) -> np.ndarray:
    """The first HEAD_BYTES bytes of each string of `raw` (no nulls), zero past its end: an n x HEAD_BYTES matrix.
    Each line's head is copied whole from the Arrow buffer that holds it (the column's views are read in place)."""
    views = raw.rechunk().to_arrow(compat_level=pl.CompatLevel.newest())
    view = np.frombuffer(views.buffers()[1], dtype=np.int32).reshape(-1, 4)[views.offset:views.offset + len(views)]
    lengths = view[:, 0]
    heads = np.zeros((len(view), HEAD_BYTES), dtype=np.uint8)
    inline = lengths <= _INLINE
    heads[inline, :_INLINE] = view[inline].view(np.uint8)[:, 4:]
    holder = np.where(inline, -1, view[:, 2])
    by_holder = np.argsort(holder, kind="stable")
    bounds = np.cumsum(np.bincount(holder + 1, minlength=len(views.buffers()) - 1))
    for index, buffer in enumerate(views.buffers()[2:]):
        rows = by_holder[bounds[index]:bounds[index + 1]]
        if len(rows):
            heads[rows] = _heads_in(np.frombuffer(buffer, dtype=np.uint8), view[rows, 3].astype(np.int64))
    short = np.flatnonzero(lengths < HEAD_BYTES)
    heads[short] *= np.arange(HEAD_BYTES) < lengths[short, None]
    return heads


def _heads_in(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The HEAD_BYTES bytes of `data` from each of `starts`, each copied as one fixed-size item; those that would
    run past its end read a zero-padded copy of its last bytes."""
    item = np.dtype((np.void, HEAD_BYTES))
    tail_start = max(len(data) - HEAD_BYTES, 0)
    tail = np.concatenate([data[tail_start:], np.zeros(HEAD_BYTES, dtype=np.uint8)])
    heads = np.empty(len(starts), dtype=item)
    near_end = starts > tail_start
    for source, first, taken in ((data, 0, ~near_end), (tail, tail_start, near_end)):
        if taken.any():
            windows = np.ndarray((len(source) - HEAD_BYTES + 1,), dtype=item, buffer=source, strides=(1,))
            heads[taken] = windows[starts[taken] - first]
    return heads.view(np.uint8).reshape(-1, HEAD_BYTES)


def _column(heads: np.ndarray, at: np.ndarray | int) -> np.ndarray:
    """The byte of each row at its column `at` (one column of all rows when `at` is one number)."""
    return heads[:, at] if np.isscalar(at) else heads[np.arange(len(heads)), at]


def _shared(columns: np.ndarray) -> np.ndarray | int:
    """The column every row has, as one number (a plain slice then), else the columns as they are."""
    return int(columns[0]) if len(columns) and (columns == columns[0]).all() else columns


def _decimal(heads: np.ndarray, first: np.ndarray | int, width: int) -> np.ndarray:
    """The number of `width` digits at column `first` of each row; a byte below "0" (a padding space) counts as 0."""
    value = np.zeros(len(heads), dtype=np.int64)
    for k in range(width):
        value = value * 10 + np.maximum(_column(heads, first + k).astype(np.int64) - _ZERO, 0)
    return value


def read_srun_stamped(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Lines of the shape "<padded srun label>: [ ][YYYY-MM-DD HH:MM:SS] <message>" (the shape's regex checked
    already): `_row`, `srun_label`, `_local_us` (the stamp as µs since the epoch in local time, null on a date that
    does not exist) and `msg`, for the lines whose stamp lies within the head; and the mask of those lines."""
    heads = line_heads(lines.get_column("raw"))
    colon = np.argmax(heads == _COLON, axis=1)
    after = heads[np.arange(len(heads)), np.minimum(colon + 2, HEAD_BYTES - 1)]
    stamp = colon + 2 + (after == _SPACE)  # the stamp's "["
    within = (colon >= 1) & (stamp + 21 <= HEAD_BYTES)
    heads, colon, stamp = heads[within], colon[within], stamp[within]
    # the label's up to 7 digits end at the colon, after padding spaces; columns before the line's start read as 0
    label_start = _shared(colon - 7)
    padded = np.pad(heads, ((0, 0), (7, 0)))
    label = _decimal(padded, label_start + 7, 7)
    date = _shared(stamp + 1)  # "YYYY-MM-DD HH:MM:SS"
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
    heads = line_heads(lines.get_column("raw"))
    host_end = 16 + np.argmax(heads[:, 16:] == _SPACE, axis=1)  # the host has no space: " kernel: [" follows it
    opening = host_end + 9
    stamp_width = 24
    found = (heads[np.arange(len(heads)), host_end] == _SPACE) & (opening + 1 + stamp_width <= HEAD_BYTES)
    heads, host_end, opening = heads[found], host_end[found], opening[found]
    first = _shared(opening + 1)
    stamp = np.stack([_column(heads, first + k) for k in range(stamp_width)], axis=1)  # " *digits.digits]..."
    close = np.argmax(stamp == _CLOSE, axis=1)
    dot = np.argmax(stamp == _DOT, axis=1)
    value = np.zeros(len(heads), dtype=np.int64)
    digits = np.zeros(len(heads), dtype=np.int64)
    for k in range(stamp_width):
        digit = stamp[:, k].astype(np.int64) - _ZERO
        is_digit = (k < close) & (digit >= 0) & (digit <= 9)
        value = np.where(is_digit, value * 10 + digit, value)
        digits += is_digit
    closed = (stamp[np.arange(len(stamp)), close] == _CLOSE) & (digits <= _EXACT_DIGITS) & (opening + close + 2 < HEAD_BYTES)
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
