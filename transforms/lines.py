"""Split a chunk of raw bytes into a frame of lines without a per-line Python loop.

Newlines are found with numpy over the whole buffer and the lines become an Arrow string array that points into
the same buffer, so a chunk is copied about once. Mis-encoded bytes are replaced (U+FFFD) and counted, NUL bytes are
stripped from the lines that carry them (a power loss leaves NUL runs in a text log) and those lines counted,
over-long lines are truncated and counted. `looks_binary` tells a binary file from a text log by its first bytes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

REPLACEMENT = "\ufffd".encode()
# Past this many bad sequences a chunk is treated as binary junk and repaired in one go.
_MAX_PATCHES = 4096
# A file is binary when more than BINARY_SHARE of its first BINARY_HEAD_BYTES, NUL bytes left aside, are control bytes
# other than these (TAB, LF, FF, CR, ESC: colour codes) or invalid UTF-8
BINARY_HEAD_BYTES = 64 << 10
BINARY_SHARE = 0.10
# every byte but the control bytes that count against a text file: deleting these leaves only those
_NOT_CONTROL = bytes(b for b in range(256) if not (b < 32 and b not in (0, 9, 10, 12, 13, 27) or b == 127))


@dataclass
class LineStats:
    lines: int = 0
    malformed: int = 0  # lines whose bytes were not valid UTF-8
    binary: int = 0  # lines with NUL bytes, stripped from them
    truncated: int = 0  # lines cut to max_line_bytes

    def add(self, other: "LineStats") -> None:
        self.lines += other.lines
        self.malformed += other.malformed
        self.binary += other.binary
        self.truncated += other.truncated


def looks_binary(head: bytes) -> bool:
    """Whether a file that starts with `head` is binary rather than a text log: more than BINARY_SHARE of its first
    BINARY_HEAD_BYTES, NUL bytes left aside, are control bytes other than TAB, LF, FF, CR and ESC, or bytes of invalid
    UTF-8 (a Latin-1 name now and then stays well below)."""
    head = head[:BINARY_HEAD_BYTES]
    size = len(head) - head.count(0)
    if not size:
        return False
    control = len(head.translate(None, _NOT_CONTROL))  # bytes methods: a 20 KB log costs no numpy call
    try:
        head.decode("utf-8")  # most logs: valid (NUL bytes are, so the text without them is too)
        invalid = 0
    except UnicodeDecodeError:
        text = head.replace(b"\0", b"")
        invalid = len(text) - len(text.decode("utf-8", "ignore").encode("utf-8"))
    return control + invalid > BINARY_SHARE * size


def repair_utf8(data: bytes) -> tuple[bytes, int]:
    """Return valid UTF-8 and the number of replaced sequences; cheap when the input is already valid."""
    try:
        data.decode("utf-8")
        return data, 0
    except UnicodeDecodeError as first:
        error = first
    parts, pos, patches = [], 0, 0
    while error is not None:
        start = pos + error.start
        parts.append(data[pos:start])
        parts.append(REPLACEMENT)
        pos = pos + error.end
        patches += 1
        if patches > _MAX_PATCHES:
            rest = data[pos:].decode("utf-8", "replace").encode("utf-8")
            return b"".join(parts) + rest, patches + rest.count(REPLACEMENT)
        try:
            data[pos:].decode("utf-8")
            error = None
        except UnicodeDecodeError as e:
            error = e
    parts.append(data[pos:])
    return b"".join(parts), patches


def _line_array(buf: bytes) -> pa.LargeStringArray:
    """One string per line of `buf` (with its newline), pointing into `buf`."""
    newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
    ends = newlines if buf.endswith(b"\n") else np.append(newlines, len(buf))
    offsets = np.empty(len(ends) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    offsets[-1] = min(offsets[-1], len(buf))
    return pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(buf))


def split_lines(chunk: bytes, first_line: int, max_line_chars: int) -> tuple[pl.DataFrame, LineStats]:
    """Frame with `line` (Int64, 1-based physical line number) and `raw` (String, no line terminator)."""
    frame, stats = split_chunks([chunk], [first_line], max_line_chars)
    return frame.drop("_chunk"), stats[0]


def split_chunks(chunks: Sequence[bytes], first_lines: Sequence[int], max_line_chars: int) -> tuple[pl.DataFrame, list[LineStats]]:
    """``split_lines`` of several chunks of whole lines in one pass, with ``_chunk`` (the chunk's position) on every
    line: a batch of many small files costs one split, not one per file. Each chunk's lines are counted on their
    own (malformed, binary, truncated)."""
    data = [c if not c or c.endswith(b"\n") else c + b"\n" for c in chunks]
    stats = [LineStats() for _ in data]
    buf = b"".join(data)
    if not buf:
        return pl.DataFrame(schema={"line": pl.Int64, "raw": pl.String, "_chunk": pl.Int32}), stats
    strings, patches = _line_array(buf), [0] * len(data)
    try:
        strings.validate(full=True)  # UTF-8 checked in place: decoding the chunks to check them costs 8x more
    except pa.ArrowInvalid:
        data, patches = map(list, zip(*(repair_utf8(c) for c in data)))
        buf = b"".join(data)
        strings = _line_array(buf)
    # lines per chunk: where each chunk's end falls among the line ends (every chunk ends with a newline)
    line_ends = np.frombuffer(strings.buffers()[1], dtype=np.int64)[1 : len(strings) + 1]
    chunk_ends = np.searchsorted(line_ends, np.cumsum([len(c) for c in data]), side="right")
    counts = np.diff(chunk_ends, prepend=0)
    starts = np.cumsum(counts) - counts
    chunk = np.repeat(np.arange(len(data), dtype=np.int32), counts)
    line = np.arange(len(strings), dtype=np.int64) + np.repeat(np.asarray(first_lines, dtype=np.int64) - starts, counts)
    frame = pl.DataFrame({"line": line, "raw": pl.from_arrow(strings).str.strip_chars_end("\r\n"), "_chunk": chunk})
    for s, n in zip(stats, counts.tolist()):
        s.lines = n

    def per_chunk(mask: pl.Series) -> list[int]:
        return np.bincount(frame["_chunk"].to_numpy()[mask.to_numpy()], minlength=len(data)).tolist()

    if any(patches):
        repaired = [i for i, p in enumerate(patches) if p]
        malformed = frame["raw"].str.contains(REPLACEMENT.decode(), literal=True) & frame["_chunk"].is_in(repaired)
        for s, n in zip(stats, per_chunk(malformed)):
            s.malformed = n
    if b"\x00" in buf:
        has_nul = frame["raw"].str.contains("\x00", literal=True)
        for s, n in zip(stats, per_chunk(has_nul)):
            s.binary = n
        frame = frame.with_columns(pl.col("raw").str.replace_all("\x00", "", literal=True))
    too_long = frame["raw"].str.len_bytes() > max_line_chars
    if too_long.any():
        for s, n in zip(stats, per_chunk(too_long)):
            s.truncated = n
        frame = frame.with_columns(pl.col("raw").str.slice(0, max_line_chars))
    return frame, stats
