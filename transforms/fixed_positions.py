"""Read the decorations of lines of one known shape with numpy, at fixed positions of each line's first bytes.

The lines come as a polars string column; its Arrow views are read in place (no copy of the text), the first
``HEAD_BYTES`` of every line gathered into one matrix, and each field read from its columns in one vectorized step.
Only lines whose fields all lie within that head are read here; ``fixed_formats`` cuts the others with polars.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from firstfault.transforms.timestamps import local_wall_us

HEAD_BYTES = 48
_INLINE = 12  # an Arrow string view holds a string of up to 12 bytes itself
_COLON, _SPACE, _ZERO = ord(":"), ord(" "), ord("0")


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


def _number(heads: np.ndarray, rows: np.ndarray, first: np.ndarray, width: int) -> np.ndarray:
    """The decimal number of `width` digits at column `first` of each row."""
    value = np.zeros(len(rows), dtype=np.int64)
    for k in range(width):
        value = value * 10 + (heads[rows, first + k].astype(np.int64) - _ZERO)
    return value


def read_srun_stamped(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Lines of the shape "<padded srun label>: [ ][YYYY-MM-DD HH:MM:SS] <message>" (the shape's regex checked
    already): `_row`, `srun_label`, `_local_us` (the stamp as µs since the epoch in local time, null on a date that
    does not exist) and `msg`, for the lines whose stamp lies within the head; and the mask of those lines."""
    heads = line_heads(lines.get_column("raw"))
    rows = np.arange(len(heads))
    colon = np.argmax(heads == _COLON, axis=1)
    stamp = colon + 2 + (heads[rows, np.minimum(colon + 2, HEAD_BYTES - 1)] == _SPACE)  # the stamp's "["
    within = (heads[rows, colon] == _COLON) & (stamp + 20 < HEAD_BYTES)
    rows, colon, stamp = rows[within], colon[within], stamp[within]
    label = np.zeros(len(rows), dtype=np.int64)
    for k in range(int(colon.max(initial=0))):  # the label's digits, after its padding spaces
        digit = heads[rows, k].astype(np.int64) - _ZERO
        is_digit = (k < colon) & (digit >= 0) & (digit <= 9)
        label = np.where(is_digit, label * 10 + digit, label)
    seconds = (_number(heads, rows, stamp + 12, 2) * 3600 + _number(heads, rows, stamp + 15, 2) * 60
               + _number(heads, rows, stamp + 18, 2))
    wall, exists = local_wall_us(_number(heads, rows, stamp + 1, 4), _number(heads, rows, stamp + 6, 2),
                                 _number(heads, rows, stamp + 9, 2), seconds * 1_000_000)
    mask = pl.Series(within)
    read = lines.filter(mask).select(
        "_row",
        srun_label=pl.lit(pl.Series(label, dtype=pl.Int32)),
        _local_us=pl.when(pl.lit(pl.Series(exists))).then(pl.lit(pl.Series(wall, dtype=pl.Int64))),
        msg=pl.col("raw").str.slice(pl.lit(pl.Series(stamp + 22, dtype=pl.Int64))),
    )
    return read, mask
