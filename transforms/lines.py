"""Split a chunk of raw bytes into a frame of lines without a per-line Python loop.

Newlines are found with numpy over the whole buffer and the lines become an Arrow string array that points into
the same buffer, so a chunk is copied about once. Mis-encoded bytes are replaced (U+FFFD) and counted, NUL bytes are
stripped from the lines that carry them (a power loss leaves NUL runs in a text log) and those lines counted,
lines of binary junk (a crash's garbage in a text log) are dropped and counted, over-long lines are truncated and
counted. `is_binary_file` tells a binary file from a text log by its first chunk.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

REPLACEMENT = "\ufffd".encode()
# A file is binary when more than BINARY_SHARE of its first BINARY_HEAD_BYTES, NUL bytes left aside, are control bytes
# other than these (TAB, LF, FF, CR, ESC: colour codes) or invalid UTF-8
BINARY_HEAD_BYTES = 64 << 10
BINARY_SHARE = 0.10
# the control bytes that count against text (not TAB, LF, FF, CR, ESC; NUL is stripped, not judged)
_CONTROL = bytes(b for b in range(256) if b < 32 and b not in (0, 9, 10, 12, 13, 27) or b == 127)
# every other byte: deleting these leaves only the control bytes
_NOT_CONTROL = bytes(sorted(set(range(256)) - set(_CONTROL)))
_CONTROL_CLASS = "[" + "".join(f"\\x{b:02x}" for b in _CONTROL) + "]"
# A line of at least this many characters that is text (at most BINARY_SHARE of them control or invalid UTF-8) makes
# a file a text log, whatever garbage surrounds it: random bytes make one such line in far more than 64 MiB.
TEXT_LINE_CHARS = 16
# Binary formats found where logs are (programs and their core dumps, compressed or columnar files): they hold
# readable lines (a program's help text), so their signature decides.
_SIGNATURES = (b"\x7fELF", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"\x04\x22\x4d\x18", b"PK\x03\x04",
               b"7z\xbc\xaf\x27\x1c", b"PAR1", b"SQLite format 3\x00")


@dataclass
class LineStats:
    lines: int = 0
    malformed: int = 0  # lines whose bytes were not valid UTF-8
    binary: int = 0  # lines with NUL bytes, stripped from them
    truncated: int = 0  # lines cut to max_line_bytes
    junk: int = 0  # lines of binary junk, dropped (the other counts are of the lines kept)

    def add(self, other: "LineStats") -> None:
        self.lines += other.lines
        self.malformed += other.malformed
        self.binary += other.binary
        self.truncated += other.truncated
        self.junk += other.junk


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


def is_binary_file(head: bytes) -> bool:
    """Whether a file whose first chunk is `head` is binary, its lines not worth landing: its start looks binary
    (`looks_binary`) and it starts with the signature of a binary format, or none of its lines is text of at least
    TEXT_LINE_CHARS characters. A text log with a block of garbage, even at its start, is not binary: its garbage
    lines are dropped (`split_chunks`) and the rest lands."""
    if not looks_binary(head):
        return False
    if head.startswith(_SIGNATURES):
        return True
    lines, _ = split_lines(head, 1, len(head))
    return lines.filter((pl.col("raw").str.len_chars() >= TEXT_LINE_CHARS) & _mostly_text(pl.col("raw"))).is_empty()


def _not_text(raw: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Per line: its control characters (other than TAB, FF, CR, ESC) and its replaced invalid UTF-8 sequences."""
    return raw.str.count_matches(_CONTROL_CLASS), raw.str.count_matches(REPLACEMENT.decode(), literal=True)


def _mostly_text(raw: pl.Expr) -> pl.Expr:
    """Lines of which at most BINARY_SHARE of the characters are control characters or invalid UTF-8."""
    control, invalid = _not_text(raw)
    return control + invalid <= BINARY_SHARE * raw.str.len_chars()


def _junk(raw: pl.Expr) -> pl.Expr:
    """Lines of binary junk: with a control character and not mostly text. Invalid UTF-8 alone is mis-encoded text
    (a Latin-1 name), repaired and kept."""
    control, _ = _not_text(raw)
    return (control > 0) & ~_mostly_text(raw)


def repair_utf8(data: bytes) -> tuple[bytes, int]:
    """Return valid UTF-8 (each invalid sequence replaced by U+FFFD) and the number of sequences replaced; cheap when
    the input is already valid, one decoding pass otherwise, however many sequences are bad."""
    try:
        data.decode("utf-8")
        return data, 0
    except UnicodeDecodeError:
        repaired = data.decode("utf-8", "replace").encode("utf-8")
    return repaired, repaired.count(REPLACEMENT) - data.count(REPLACEMENT)


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
    line: a batch of many small files costs one split, not one per file. Lines of binary junk (`_junk`, NUL bytes
    left aside) are dropped. Each chunk's lines are counted on their own (malformed, binary, truncated, junk)."""
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

    has_nul = None
    if b"\x00" in buf:
        has_nul = frame["raw"].str.contains("\x00", literal=True)
        frame = frame.with_columns(pl.col("raw").str.replace_all("\x00", "", literal=True))
    if buf.translate(None, _NOT_CONTROL):  # only control bytes make junk: most chunks have none
        junk = frame.select(_junk(pl.col("raw"))).to_series()
        if junk.any():
            for s, n in zip(stats, per_chunk(junk)):
                s.junk = n
            frame = frame.filter(~junk)
            has_nul = None if has_nul is None else has_nul.filter(~junk)
    if any(patches):
        repaired = [i for i, p in enumerate(patches) if p]
        malformed = frame["raw"].str.contains(REPLACEMENT.decode(), literal=True) & frame["_chunk"].is_in(repaired)
        for s, n in zip(stats, per_chunk(malformed)):
            s.malformed = n
    if has_nul is not None:
        for s, n in zip(stats, per_chunk(has_nul)):
            s.binary = n
    too_long = frame["raw"].str.len_bytes() > max_line_chars
    if too_long.any():
        for s, n in zip(stats, per_chunk(too_long)):
            s.truncated = n
        frame = frame.with_columns(pl.col("raw").str.slice(0, max_line_chars))
    return frame, stats
