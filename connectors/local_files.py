"""Local (or any fsspec) log files: resolve the context's globs, fingerprint, and read them in bounded batches."""
from __future__ import annotations

import codecs
import fnmatch
import glob
import io
import os
import posixpath
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import fsspec
import numpy as np
from fsspec.compression import compr
from fsspec.utils import infer_compression

from firstfault.connectors.regular_files import NOT_REGULAR
from firstfault.connectors.static_context import AttemptContext, LogSpec
from firstfault.connectors.urls import is_normal

_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class FilePart:
    """Bytes [start, end) of a plain file, from a line start to a line start, landed apart from the rest of it."""
    start: int
    end: int
    first_line: int  # 1-based number of its first line in the file
    last_ts: datetime | None = None  # the stamp the file's lines before it end on: where its clock starts


@dataclass(frozen=True)
class LogFile:
    source: str
    uri: str  # fsspec URL, `file://` for local files
    node: str | None  # node known from `{node}` or the file name
    rank: int | None  # rank known from the file name (`rank3.log`)
    label: str  # how `srun --label` task ids read in this file
    pattern: str  # the spec path it came from
    origin: str = ""  # LogSpec.origin of a staged file
    part: FilePart | None = None  # only these bytes of the file


@dataclass(frozen=True)
class Missing:
    """A path pattern that gave no file to read: `missing` (nothing matches) or `error` (its source cannot be
    listed, or its expansion went past the GlobLimits), with the reason."""
    source: str
    pattern: str
    reason: str
    status: str = "missing"


@dataclass(frozen=True)
class GlobLimits:
    """How far the path patterns of one attempt are expanded (`[landing] max_glob_files`, `glob_seconds`): a
    pattern matching more files is not read, and patterns still unexpanded when the attempt's time is up are not
    read either (`/usr/**` given as a log path would otherwise walk the machine)."""
    max_files: int = 20_000
    seconds: float = 20.0


class _Refused(Exception):
    """A pattern whose expansion went past the limits."""


def resolve_logs(ctx: AttemptContext, limits: GlobLimits = GlobLimits()) -> tuple[list[LogFile], list[Missing]]:
    """Expand `{node}` and globs of every log spec within `limits`; patterns matching nothing, sources that cannot
    be listed and patterns past the limits are reported, not raised."""
    files: dict[str, LogFile] = {}
    missing: list[Missing] = []
    deadline = time.monotonic() + limits.seconds
    nodes = frozenset(ctx.nodes)
    for spec in ctx.logs:
        expansions = [(spec.path.replace("{node}", n), n) for n in ctx.nodes] if "{node}" in spec.path else [(spec.path, None)]
        for rel, node in expansions:
            found, problem = _glob(ctx.base_uri, rel, limits, deadline)
            if problem is not None or not found:
                missing.append(Missing(spec.source, rel, problem or why_nothing_matches(ctx.base_uri, rel),
                                       "missing" if problem is None else "error"))
            for uri in found:
                files.setdefault(uri, _describe(uri, spec, node, nodes))
    return sorted(files.values(), key=lambda f: (f.source, f.uri)), missing


def log_bytes(ctx: AttemptContext) -> int:
    """Size of the attempt's log files (0 for what cannot be listed)."""
    return files_bytes(resolve_logs(ctx)[0])


def files_bytes(files: Sequence[LogFile]) -> int:
    total = 0
    for f in files:
        try:
            if (local := _local_file(f.uri)) is not None:
                total += os.path.getsize(local)
                continue
            fs, path = fsspec.core.url_to_fs(f.uri)
            total += fs.size(path) or 0
        except OSError:
            continue
    return total


def why_nothing_matches(base_uri: str, rel: str) -> str:
    """A device, pipe or folder named (or matched by a glob) where an input file should be is never read (it may
    never end): say so."""
    target = rel if "://" in rel or rel.startswith("/") else posixpath.join(base_uri, rel)
    fs, path = fsspec.core.url_to_fs(target)
    local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
    if local and glob.glob(path, recursive=True):  # matches, none of them a regular file (_glob keeps those)
        return f"{NOT_REGULAR}: not read"
    return "no file matches"


def resolve_paths(ctx: AttemptContext, patterns: tuple[str, ...], source: str = "",
                  limits: GlobLimits = GlobLimits()) -> tuple[list[str], list[Missing]]:
    """The files (URLs) the patterns match, within `limits`, and the patterns that gave none (`source` names them)."""
    found, missing = [], []
    deadline = time.monotonic() + limits.seconds
    for rel in patterns:
        uris, problem = _glob(ctx.base_uri, rel, limits, deadline)
        found.extend(uris)
        if problem is not None or not uris:
            missing.append(Missing(source, rel, problem or why_nothing_matches(ctx.base_uri, rel),
                                   "missing" if problem is None else "error"))
    return sorted(set(found)), missing


def _glob(base_uri: str, rel: str, limits: GlobLimits, deadline: float) -> tuple[list[str], str | None]:
    """The files a pattern matches, or none and why: its source cannot be listed (an unreachable server, an
    unknown protocol), or it went past the limits."""
    target = rel if "://" in rel or rel.startswith("/") else posixpath.join(base_uri, rel)
    if (local := _plain_local_path(target)) is not None:  # most patterns: no filesystem object to build per node
        try:
            return ["file://" + p for p in _local_glob(local, limits, deadline)], None
        except _Refused as e:
            return [], str(e)
    try:
        fs, path = fsspec.core.url_to_fs(target)  # a remote filesystem may connect here
    except Exception as e:  # noqa: BLE001 - whatever the protocol's library raises, the source is reported
        return [], f"cannot be listed: {type(e).__name__}: {e}"
    try:
        if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
            return [fs.unstrip_protocol(p) for p in _local_glob(path, limits, deadline)], None
        matches = fs.glob(path) if glob.has_magic(path) else ([path] if fs.exists(path) else [])
        if len(matches) > limits.max_files:
            raise _Refused(_too_many(limits))
    except _Refused as e:
        return [], str(e)
    except FileNotFoundError:
        return [], None
    except Exception as e:  # noqa: BLE001
        return [], f"cannot be listed: {type(e).__name__}: {e}"
    # a remote listing may name links like `%2e%2e/x`: only URLs read as the path they show are fetched
    found = ((p, fs.unstrip_protocol(p)) for p in matches)
    return [url for p, url in found if is_normal(url) and _is_file(fs, p)], None


def _plain_local_path(target: str) -> str | None:
    """The path of a local target that needs no normalising (absolute, no `.`/`..` or doubled slashes, no URL
    scheme or chaining), as fsspec's local filesystem would strip it; None for any other target."""
    path = target.removeprefix("file://")
    if not path.startswith("/") or "://" in path or "::" in path or "//" in path or "\\" in path:
        return None
    if any(part in (".", "..") for part in path.split("/")) or (len(path) > 1 and path.endswith("/")):
        return None
    return path


def _too_many(limits: GlobLimits) -> str:
    return f"matches more than {limits.max_files} files ([landing] max_glob_files): not read"


def _local_glob(path: str, limits: GlobLimits, deadline: float) -> list[str]:
    """The regular files a local pattern matches, sorted, as the standard library's glob finds them (`**` any
    depth, names starting with `.` only for a pattern that does), in a walk that stops with _Refused past
    `limits` (glob itself cannot be stopped: `/usr/**` walks the whole tree before it answers). The walk lists
    each folder once with os.scandir, several times faster than fsspec's glob (a nightly run expands a pattern
    per node of every attempt)."""
    if not glob.has_magic(path):
        return [path] if os.path.isfile(path) else []
    parts = path.split("/")
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    found: dict[str, None] = {}

    def entries(folder: str) -> list[os.DirEntry]:
        if time.monotonic() > deadline:
            raise _Refused(f"not expanded within {limits.seconds:g} s ([landing] glob_seconds): not read")
        try:
            with os.scandir(folder or ".") as listing:
                return sorted(listing, key=lambda e: e.name)
        except OSError:
            return []

    def walk(folder: str, rest: list[str], within: frozenset = frozenset()) -> None:
        """`within`: the folders a `**` went through to get here (a symlink back to one of them is a loop)."""
        if not rest:
            if os.path.isfile(folder):
                found[folder] = None
                if len(found) > limits.max_files:
                    raise _Refused(_too_many(limits))
            return
        head, tail = rest[0], rest[1:]
        if head == "**":
            walk(folder, tail)
            for entry in entries(folder):
                if entry.name.startswith("."):
                    continue
                if _is_dir(entry):
                    if (key := _identity(entry)) not in within:
                        walk(entry.path, rest, within | {key})
                elif not tail:
                    walk(entry.path, tail)
        elif glob.has_magic(head):
            for entry in entries(folder):
                if fnmatch.fnmatchcase(entry.name, head) and (head.startswith(".") or not entry.name.startswith(".")):
                    walk(entry.path, tail)
        elif head:
            walk(posixpath.join(folder, head), tail)
        else:
            walk(folder, tail)  # an empty segment: a doubled or trailing slash

    walk("/".join(parts[:fixed]) or ("/" if path.startswith("/") else ""), parts[fixed:])
    return sorted(found)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _identity(entry: os.DirEntry) -> tuple[int, int]:
    try:
        info = entry.stat()
    except OSError:
        return -1, hash(entry.path)
    return info.st_dev, info.st_ino


def _is_file(fs, path: str) -> bool:
    try:
        return fs.isfile(path)
    except OSError:
        return False


def _describe(uri: str, spec: LogSpec, node: str | None, nodes: frozenset[str]) -> LogFile:
    name = posixpath.basename(uri)
    if node is None:
        node = node_in_name(name, nodes)
    m = _RANK_IN_NAME.search(name)
    return LogFile(spec.source, uri, node, int(m.group(1)) if m else None, spec.label, spec.path, spec.origin)


def node_in_name(name: str, nodes: frozenset[str]) -> str | None:
    """The longest node name found in a file name between non-alphanumeric characters (node-1 vs node-10): the
    name's pieces between such boundaries are looked up, so the cost does not grow with the number of nodes."""
    cuts = [0, *(i for i, c in enumerate(name) if not _alnum(c)), len(name)]
    starts = sorted({0, *(i + 1 for i in cuts[1:-1])})
    ends = sorted({len(name), *cuts[1:-1]})
    hits = [name[a:b] for a in starts for b in ends if b > a and name[a:b] in nodes]
    return max(hits, key=lambda n: (len(n), n)) if hits else None


def _alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


def fingerprint(uri: str) -> str:
    """Cheap identity of a file's content version, for incremental runs: size and ETag for an object store, whose
    `info` holds other keys after a listing than after a HEAD (so fsspec's `ukey`, a hash of them, depends on what the
    process listed before); size and mtime (`ukey`) for a file system."""
    if (local := _local_file(uri)) is not None:
        return _LOCAL_FS.ukey(local)  # what the general path below returns for a local file, with one stat
    fs, path = fsspec.core.url_to_fs(uri)
    info = fs.info(path)
    etag = info.get("ETag") or info.get("etag")
    if etag:
        return f"{info.get('size')}:{str(etag).strip(chr(34))}"
    try:
        return str(fs.ukey(path))
    except (OSError, NotImplementedError, AttributeError):
        return f"{info.get('size')}:{info.get('mtime') or info.get('LastModified')}"


def plain_size(uri: str) -> int | None:
    """The size of an uncompressed file (None for a compressed or UTF-16 one, or when it cannot be read): what can be
    cut into parts."""
    if infer_compression(uri) is not None:
        return None
    try:
        fs, path = fsspec.core.url_to_fs(uri)
        with fs.open(path, "rb") as f:
            if f.read(2) in _UTF16_BOMS:  # decoded from its start only
                return None
        return fs.size(path)
    except OSError:
        return None


def split_file(uri: str, parts: int) -> list[FilePart]:
    """A plain file cut into about equal parts at line starts, each with the number of its first line (newlines
    counted in one pass over the file, a block at a time)."""
    fs, path = fsspec.core.url_to_fs(uri)
    size = fs.size(path)
    with fs.open(path, "rb") as f:
        starts = [0]
        for k in range(1, parts):
            f.seek(max(size * k // parts, starts[-1]))
            f.readline()  # to the next line start
            if f.tell() < size and f.tell() > starts[-1]:
                starts.append(f.tell())
        f.seek(0)
        first_lines, newlines, position = [1], 0, 0
        for start in starts[1:]:
            while position < start:
                block = f.read(min(_COUNT_BLOCK, start - position))
                newlines += block.count(b"\n")
                position += len(block)
            first_lines.append(newlines + 1)
    return [FilePart(start, end, line) for start, end, line in zip(starts, [*starts[1:], size], first_lines)]


_COUNT_BLOCK = 16 << 20


def read_batches(uri: str, batch_bytes: int, max_line_bytes: int, max_lines: int | None = None,
                 part: FilePart | None = None) -> Iterator[tuple[bytes, int, int]]:
    """Yield (chunk of whole lines, 1-based number of its first line, bytes cut from over-long lines), of the whole
    file or of one `part` of a plain file.

    Memory stays bounded by batch_bytes + max_line_bytes whatever the file: a line longer than the budget is
    cut to max_line_bytes and the rest of it skipped; a chunk holds at most `max_lines` lines (a flood of empty
    lines is many rows in few bytes). A corrupt or truncated compressed file yields every line decoded before the
    damage, then raises.
    """
    line_no = 1 if part is None else part.first_line
    carry = b""
    with _open_bounded(uri, part) as (f, compression_ratio_exceeded):
        damage = None
        while damage is None:
            block, damage = _read_up_to(f, batch_bytes)
            damage = damage or compression_ratio_exceeded()
            if not block:
                break
            data = carry + block
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) <= max_line_bytes:
                    carry = data
                    continue
                # one line longer than the budget: keep its head, drop the rest up to its end
                skipped, carry = _skip_to_newline(f, batch_bytes)
                yield data[:max_line_bytes] + b"\n", line_no, len(data) - max_line_bytes + skipped
                line_no += 1
                continue
            chunk, carry = data[: cut + 1], data[cut + 1 :]
            for part, lines in _at_most_lines(chunk, max_lines):
                yield part, line_no, 0
                line_no += lines
    if carry:
        yield carry, line_no, 0
    if damage is not None:
        raise damage


def _at_most_lines(chunk: bytes, max_lines: int | None) -> list[tuple[bytes, int]]:
    """`chunk` (whole lines) cut after every max_lines-th newline, found in one vectorized pass; each part with its
    number of lines."""
    lines = chunk.count(b"\n")
    if max_lines is None or lines <= max_lines:
        return [(chunk, lines)]
    ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 0x0A)[max_lines - 1::max_lines] + 1
    bounds = [0, *ends.tolist()]
    if bounds[-1] < len(chunk):
        bounds.append(len(chunk))
    return [(chunk[a:b], min(max_lines, lines - k * max_lines)) for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]


_READ_STEP = 1 << 20
# a compressed file may expand this much once this much has come out of it (logs compress 10-20:1; a bomb 1000:1)
MAX_COMPRESSION_RATIO = 100
RATIO_CHECKED_AFTER = 64 << 20


class DecompressionBomb(ValueError):
    """A compressed file expanding far beyond what logs do: what came out before is kept, the rest is not read."""


@contextmanager
def _open_bounded(uri: str, part: FilePart | None = None):
    """(readable stream, check) for `uri` (only the bytes of `part`: a plain file's), decompressed by its suffix;
    check() returns a DecompressionBomb once the output exceeds RATIO_CHECKED_AFTER and MAX_COMPRESSION_RATIO times
    the compressed bytes read."""
    compression = infer_compression(uri)
    local = _local_file(uri)
    with open(local, "rb") if local is not None else fsspec.open(uri, "rb") as raw:
        if part is not None:
            raw.seek(part.start)
            yield _RangeReader(raw, part.end - part.start), lambda: None
            return
        if compression is None:
            yield _utf8(raw), lambda: None
            return
        stream = compr[compression](raw, mode="rb")
        out = _CountingReader(stream)

        def exceeded() -> DecompressionBomb | None:
            if out.count > RATIO_CHECKED_AFTER and out.count > MAX_COMPRESSION_RATIO * max(raw.tell(), 1):
                return DecompressionBomb(f"decompressed {out.count >> 20} MiB from {raw.tell() >> 10} KiB "
                                         f"(over {MAX_COMPRESSION_RATIO}:1): the rest is not read")
            return None

        try:
            yield _utf8(out), exceeded
        finally:
            stream.close()


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_LOCAL_FS = fsspec.filesystem("file")


def _local_file(uri: str) -> str | None:
    """The path of a `file://` URL as the landing lists local files (an absolute path that needs no normalising),
    opened without fsspec (whose per-open set-up costs more than reading a 20 KB log); None for any other URL."""
    return _plain_local_path(uri) if uri.startswith("file:///") else None


def _utf8(stream):
    """The stream as UTF-8: a file that starts with a UTF-16 byte order mark is decoded (Windows tools write logs
    so), any other is read as it is (a buffered local file: untouched, its head peeked)."""
    peek = getattr(stream, "peek", None) if isinstance(stream, io.BufferedReader) else None
    head = peek(2)[:2] if peek else stream.read(2)
    if head in _UTF16_BOMS:
        if peek:
            stream.read(2)
        return _Utf16Reader(stream, head)
    return stream if peek else _Prefixed(stream, head)


class _Prefixed:
    """`head` (bytes already read from the stream), then the rest of the stream."""

    def __init__(self, stream, head: bytes):
        self._stream, self._head = stream, head
        self._read1 = getattr(stream, "read1", stream.read)

    def read(self, size: int = -1) -> bytes:
        return self._take(size, self._stream.read)

    def read1(self, size: int = -1) -> bytes:
        return self._take(size, self._read1)

    def _take(self, size: int, read) -> bytes:
        head, self._head = self._head, b""
        if 0 <= size < len(head):
            head, self._head = head[:size], head[size:]
            return head
        return head + read(size if size < 0 else size - len(head)) if head else read(size)


class _Utf16Reader:
    """A UTF-16 stream (its byte order from the mark) as UTF-8 bytes, decoded a read at a time."""

    def __init__(self, stream, bom: bytes):
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        self._pending = self._decoder.decode(bom).encode("utf-8")

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        out = self._pending + self._decoder.decode(data, final=not data).encode("utf-8")
        self._pending = b""
        return out


class _RangeReader:
    """The next `size` bytes of a stream, then its end."""

    def __init__(self, stream, size: int):
        self._stream, self._left = stream, size

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(self._left if size < 0 else min(size, self._left))
        self._left -= len(data)
        return data


class _CountingReader:
    """A stream that counts the bytes read from it."""

    def __init__(self, stream):
        self._stream, self.count = stream, 0
        self._read1 = getattr(stream, "read1", stream.read)

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        data = self._read1(size)
        self.count += len(data)
        return data


def _read_up_to(f, size: int) -> tuple[bytes, Exception | None]:
    """Read size bytes in 1 MiB steps; on a decoding error return what came before it, and the error."""
    parts, total = [], 0
    # read1 of a decompressing stream returns what it has before touching the damage; plain reads don't
    read = getattr(f, "read1", f.read)
    while total < size:
        try:
            part = read(min(_READ_STEP, size - total))
        except (EOFError, OSError) as e:
            return b"".join(parts), e
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b"".join(parts), None


def _skip_to_newline(f, batch_bytes: int) -> tuple[int, bytes]:
    """Skip the rest of an over-long line; return (bytes skipped, what follows its newline)."""
    skipped = 0
    while True:
        block = f.read(batch_bytes)
        if not block:
            return skipped, b""
        nl = block.find(b"\n")
        if nl >= 0:
            return skipped + nl, block[nl + 1 :]
        skipped += len(block)
