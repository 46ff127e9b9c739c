"""The Parquet lake: one fsspec root, hive partitions day=/attempt= per table, each attempt's files in generations
that one completion marker per attempt makes readable (docs/DESIGN.md §2)."""
from __future__ import annotations

import json
import os
import posixpath
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from firstfault.errors import BadInput

STAGED = "staged"  # the folder of connectors/base.py Staging: remote logs fetched for an attempt
COMMITS = "commits"  # the folder of the completion markers: commits/day=D/attempt_key=K/<gen>.json
# the tables landing writes for every attempt (docs/tables.md)
TABLES = ("logs", "events", "progress", "metrics", "context", "connector_reports", "flight_recorder")
# folders of the root that hold no attempt partitions
_NOT_TABLES = {STAGED, "results", "contexts", COMMITS}
_MARKER = "_complete-"  # an older version's marker, one per partition (empty)
_COMMIT = re.compile(r"(g\d{8}T\d{12}[0-9a-f]{6})\.json")
_GENERATION_FILE = re.compile(r"part-(g\d{8}T\d{12}[0-9a-f]{6})-")


class DamagedPartition(BadInput):
    """A file the attempt's completion marker lists is missing (deleted by hand, a lost object): reading on would
    silently give fewer rows."""

    def __init__(self, file: str, marker: str):
        super().__init__(file, None, f"missing, though the completion marker {marker} lists it: the attempt's "
                                     "partition is damaged (land the attempt again, e.g. `firstfault nightly --force`)")


def new_generation() -> str:
    """A landing's generation: its UTC start (so newer sorts after older) and a random tail (runs of the same
    microsecond), e.g. g20261129T011002123456a1b2c3."""
    return f"g{datetime.now(timezone.utc):%Y%m%dT%H%M%S%f}{secrets.token_hex(3)}"


def _generation(name: str) -> str | None:
    """The generation a file of a partition belongs to: its marker's or its name's; "" for the Parquet files of an
    older version (no generation in the name, no marker: complete as they are); None for anything else."""
    if name.startswith(_MARKER):
        return name[len(_MARKER):]
    if m := _GENERATION_FILE.match(name):
        return m.group(1)
    return "" if name.endswith(".parquet") else None


def readable_generation(names: Sequence[str]) -> str | None:
    """Of the file names of a partition an older version committed (a marker per partition), the newest complete
    generation (None: nothing readable). A generation without its marker is a landing that failed or was killed."""
    complete = {n[len(_MARKER):] for n in names if n.startswith(_MARKER)}
    complete |= {""} if any(_generation(n) == "" for n in names) else set()
    return max(complete, default=None)


@dataclass(frozen=True)
class Commit:
    """An attempt's newest completion marker: its generation and, per table that has rows, the file names it holds."""
    marker: str  # URL
    generation: str
    tables: dict[str, list[str]]


class Lake:
    def __init__(self, root: str, storage_options: dict | None = None):
        self.root = root.rstrip("/")
        self.fs, self._root_path = fsspec.core.url_to_fs(self.root, **(storage_options or {}))
        self.is_local = self.fs.protocol in ("file", "local") or "file" in tuple(self.fs.protocol)
        self._commits: dict[str, Commit] = {}  # by marker path: a marker never changes once written

    def path(self, *parts: str) -> str:
        """A path under the root, in the filesystem's own form (for `self.fs`); `url` gives the fsspec URL."""
        return posixpath.join(self._root_path, *parts)

    def url(self, *parts: str) -> str:
        return self.fs.unstrip_protocol(self.path(*parts))

    def partition_path(self, table: str, day: str, key: str) -> str:
        return posixpath.join(self._root_path, table, f"day={day}", f"attempt_key={key}")

    def partition_url(self, table: str, day: str, key: str) -> str:
        return self.fs.unstrip_protocol(self.partition_path(table, day, key))

    def write(self, table: str, day: str, key: str, batches: Iterable[pa.RecordBatch] | pa.Table, schema: pa.Schema,
              generation: str | None = None) -> int:
        """Write one attempt's partition of `table` from `batches` (streamed) as files of `generation`; return the row
        count. Without a generation the attempt is replaced by this table alone: a new generation, committed at once."""
        if isinstance(batches, pa.Table):
            schema, batches = batches.schema, batches.to_batches(max_chunksize=_ROWS_PER_GROUP)
        alone = generation is None
        generation = generation or new_generation()
        with self.partition_writer(table, day, key, schema, generation) as writer:
            for batch in batches:
                writer.write(batch)
        if alone:
            self.commit(day, key, generation)
        return writer.rows

    def partition_writer(self, table: str, day: str, key: str, schema: pa.Schema, generation: str,
                         piece: str | None = None) -> "PartitionWriter":
        """A writer of one attempt's partition of `table` in `generation`: `write` appends batches, `close`
        finishes (idempotent). Readers see the files once the generation is committed (`commit`). Files are written
        directly (pyarrow's write_dataset costs ~80 ms of set-up per call, more than most partitions take); a
        partition with no rows gets no file. A `piece` names files of their own in the same generation (the parts of
        a big file landed by other processes)."""
        path = self.partition_path(table, day, key)
        return PartitionWriter(self.fs, path, schema, "-".join(("part", generation, *([piece] if piece else []))))

    @cached_property
    def table_folders(self) -> tuple[str, ...]:
        """The table folders of the root (also of tables an older version wrote), listed once per Lake: an attempt's
        partitions are then looked up directly, never by a glob over the lake (fsspec would list every partition)."""
        try:
            listed = {posixpath.basename(p.rstrip("/")) for p in self.fs.ls(self._root_path, detail=False)}
        except FileNotFoundError:
            listed = set()
        return tuple(sorted((listed | set(TABLES)) - _NOT_TABLES))

    def commit(self, day: str, key: str, generation: str) -> None:
        """Make `generation` the attempt's readable one: one completion marker listing the files it wrote per table
        (written after all of them, in one write, so a killed run never commits half an attempt), then the older
        generations' files and markers go, and the attempt's partitions of tables it has no rows in (also an older
        version's tables). A newer generation (a run landing the attempt at the same time) is left alone."""
        listings = {table: self._partition_names(table, day, key) for table in self.table_folders}
        held = {table: files for table, names in listings.items()
                if (files := [n for n in names if n.endswith(".parquet") and _generation(n) == generation])}
        folder = self.partition_path(COMMITS, day, key)
        older_markers = [posixpath.join(folder, n) for n in self._partition_names(COMMITS, day, key)
                         if (m := _COMMIT.fullmatch(n)) is None or m.group(1) < generation]
        self._put_marker(posixpath.join(folder, f"{generation}.json"),
                         json.dumps({"generation": generation, "tables": held}, sort_keys=True).encode())
        stale, folders = [], []
        for table, names in listings.items():
            older = [n for n in names if (g := _generation(n)) is not None and g < generation]
            if table not in held and names and len(older) == len(names):
                folders.append(self.partition_path(table, day, key))
            else:
                stale.extend(posixpath.join(self.partition_path(table, day, key), n) for n in older)
        if stale or older_markers:
            self.fs.rm(stale + older_markers)
        for folder in folders:
            self.fs.rm(folder, recursive=True)

    def _put_marker(self, path: str, body: bytes) -> None:
        """Whole or not at all: an object store's put is; a local file is written aside and renamed."""
        if not self.is_local:
            self.fs.pipe_file(path, body)
            return
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        aside = f"{path}.tmp"  # the generation is unique: no other writer of this name
        self.fs.pipe_file(aside, body)
        os.replace(aside, path)

    def discard(self, day: str, key: str, generation: str, tables: Sequence[str] | None = None) -> None:
        """Remove what `generation` wrote of the attempt before it was committed (a failed landing); the readable
        generation stays."""
        files = [posixpath.join(self.partition_path(table, day, key), n) for table in (self.table_folders if tables is None else tables)
                 for n in self._partition_names(table, day, key) if _generation(n) == generation]
        if files:
            self.fs.rm(files)

    def _partition_names(self, table: str, day: str, key: str) -> list[str]:
        """The file names in one partition folder (none when it does not exist), listed afresh: an object store's
        listing cache may predate this run's writes."""
        try:
            return sorted(posixpath.basename(p) for p in self.fs.ls(self.partition_path(table, day, key), detail=False, refresh=True))
        except FileNotFoundError:
            return []

    def files(self, table: str, day: str, key: str) -> list[str]:
        return self.partition_files(table, [(day, key)])

    def partition_files(self, table: str, partitions: Sequence[tuple[str, str]]) -> list[str]:
        """The Parquet files (URLs) of the readable generation of these (day, attempt key) partitions of `table`,
        partition by partition in the given order. One listing of the table and one of the markers per day, or per
        partition when it is its day's only one: a glob per partition compiles a pattern and lists a folder, which
        cost seconds per night over a fleet's attempts. Raises DamagedPartition when a file a marker lists is gone."""
        keys_by_day: dict[str, set[str]] = {}
        for day, key in partitions:
            keys_by_day.setdefault(day, set()).add(key)
        found: dict[tuple[str, str], list[str]] = {}
        markers: dict[tuple[str, str], list[str]] = {}
        for day, keys in keys_by_day.items():
            found.update(self._listed(table, day, keys))
            markers.update(self._listed(COMMITS, day, keys))
        commits = self._read_commits(markers)
        return [url for partition in dict.fromkeys(partitions)
                for url in self._readable(table, found.get(partition, []), commits.get(partition))]

    def _listed(self, table: str, day: str, keys: set[str]) -> dict[tuple[str, str], list[str]]:
        """The paths in the partitions of `keys` of `table` on `day`, by (day, key), in one listing."""
        folder = (self.partition_path(table, day, next(iter(keys))) if len(keys) == 1
                  else posixpath.join(self._root_path, table, f"day={day}"))
        found: dict[tuple[str, str], list[str]] = {}
        for path in self.fs.find(folder):
            partition = posixpath.dirname(path)
            key = posixpath.basename(partition).removeprefix("attempt_key=")
            if key in keys and partition == self.partition_path(table, day, key):
                found.setdefault((day, key), []).append(path)
        return found

    def table_files(self, table: str) -> list[str]:
        """The Parquet files (URLs) of the readable generation of every partition of `table`, in path order."""
        by_partition = self._by_partition(table)
        commits = self._read_commits(self._by_partition(COMMITS))
        listing = set(by_partition) | {partition for partition, commit in commits.items() if table in commit.tables}
        return [url for partition in sorted(listing)
                for url in self._readable(table, by_partition.get(partition, []), commits.get(partition))]

    def _by_partition(self, table: str) -> dict[tuple[str, str], list[str]]:
        """Every path under `table`, by the (day, key) of its partition."""
        found: dict[tuple[str, str], list[str]] = {}
        for path in self.fs.find(self.path(table)):
            folder = posixpath.dirname(path)
            day = posixpath.basename(posixpath.dirname(folder)).removeprefix("day=")
            found.setdefault((day, posixpath.basename(folder).removeprefix("attempt_key=")), []).append(path)
        return found

    def _read_commits(self, markers: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], Commit]:
        """Each partition's newest completion marker, read (once per Lake: a marker never changes)."""
        newest = {partition: max(named) for partition, paths in markers.items()
                  if (named := [p for p in paths if _COMMIT.fullmatch(posixpath.basename(p))])}
        unread = [p for p in newest.values() if p not in self._commits]
        for path, body in (self.fs.cat(unread) if unread else {}).items():
            url = self.fs.unstrip_protocol(path)
            try:
                doc = json.loads(body)
                self._commits[path] = Commit(url, doc["generation"], {t: list(names) for t, names in doc["tables"].items()})
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise BadInput(url, None, f"not a completion marker ({type(e).__name__}: {e})") from None
        return {partition: self._commits[path] for partition, path in newest.items()}

    def _readable(self, table: str, paths: list[str], commit: Commit | None) -> list[str]:
        """Of one partition's files: the Parquet files (URLs, sorted) of its newest complete generation, those its
        attempt's marker lists (an older version's lake: the newest generation with a marker in the partition)."""
        if commit is None:
            generation = readable_generation([posixpath.basename(p) for p in paths])
            return sorted(self.fs.unstrip_protocol(p) for p in paths
                          if p.endswith(".parquet") and _generation(posixpath.basename(p)) == generation)
        names = commit.tables.get(table, [])
        if not names:
            return []
        folder = posixpath.dirname(paths[0]) if paths else None
        present = {posixpath.basename(p) for p in paths}
        for name in names:
            if name not in present:
                partition = commit.marker.rsplit("/", 3)[-3:-1]
                raise DamagedPartition(self.url(table, *partition, name), commit.marker)
        return sorted(self.fs.unstrip_protocol(posixpath.join(folder, n)) for n in names)

    def read(self, table: str, day: str, key: str) -> pa.Table | None:
        """The attempt's rows of `table`; None when it has none (no file)."""
        files = self.files(table, day, key)
        if not files:
            return None
        # through pyarrow.parquet: pyarrow.dataset (~30 ms of start-up) is then imported only by a read
        return pq.read_table([self.fs._strip_protocol(f) for f in files], filesystem=self.fs, partitioning=None)


# Free text and per-row ids never repeat: dictionary-encoding them only costs time, and their min/max statistics
# prune nothing.
_UNIQUE_TEXT = {"raw", "message", "msg", "text", "fields", "summary", "locator", "event_id"}


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """Names, sources, kinds and the like repeat; line numbers and timestamps hardly do (encoding them costs time
    and, measured on landed logs, makes the file bigger)."""
    text = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view, pa.types.is_dictionary)
    return [f.name for f in schema if f.name not in _UNIQUE_TEXT and any(is_text(f.type) for is_text in text)]


_ROWS_PER_GROUP = 256 * 1024
_ROWS_PER_FILE = 4_000_000


class PartitionWriter:
    """<name>-0.parquet, <name>-1.parquet, ... of one partition, a new file every _ROWS_PER_FILE rows; none without
    rows."""

    def __init__(self, fs, folder: str, schema: pa.Schema, name: str):
        self.fs, self.folder, self.schema, self.name = fs, folder, schema, name
        self.files = 0
        self.file_rows = 0
        self.rows = 0
        self.closed = False
        self._sink = self._writer = None

    def _open(self) -> None:
        self._finish_file()
        if self.files == 0:
            self.fs.makedirs(self.folder, exist_ok=True)
        self._sink = self.fs.open(posixpath.join(self.folder, f"{self.name}-{self.files}.parquet"), "wb")
        self._writer = pq.ParquetWriter(
            self._sink, self.schema, compression="zstd", compression_level=1,
            use_dictionary=_dictionary_columns(self.schema),
            write_statistics=[f.name for f in self.schema if f.name not in _UNIQUE_TEXT],
        )
        self.files += 1
        self.file_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if self.closed:
            raise ValueError(f"partition {self.folder} is already closed")
        if not batch.num_rows:
            return
        if self._writer is None or self.file_rows >= _ROWS_PER_FILE:
            self._open()
        self._writer.write_batch(batch, row_group_size=_ROWS_PER_GROUP)
        self.file_rows += batch.num_rows
        self.rows += batch.num_rows

    def _finish_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def close(self) -> None:
        if self.closed:
            return
        self._finish_file()
        self.closed = True

    def __enter__(self) -> "PartitionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
