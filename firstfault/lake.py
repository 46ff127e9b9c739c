"""The Parquet lake: one fsspec root, hive partitions day=/attempt= per table (docs/DESIGN.md §2)."""
from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq


STAGED = "staged"  # the folder of connectors/base.py Staging: remote logs fetched for an attempt


class Lake:
    def __init__(self, root: str, storage_options: dict | None = None):
        self.root = root.rstrip("/")
        self.fs, self._root_path = fsspec.core.url_to_fs(self.root, **(storage_options or {}))
        self.is_local = self.fs.protocol in ("file", "local") or "file" in tuple(self.fs.protocol)

    def path(self, *parts: str) -> str:
        """A path under the root, in the filesystem's own form (for `self.fs`); `url` gives the fsspec URL."""
        return posixpath.join(self._root_path, *parts)

    def url(self, *parts: str) -> str:
        return self.fs.unstrip_protocol(self.path(*parts))

    def partition_path(self, table: str, day: str, key: str) -> str:
        return posixpath.join(self._root_path, table, f"day={day}", f"attempt_key={key}")

    def partition_url(self, table: str, day: str, key: str) -> str:
        return self.fs.unstrip_protocol(self.partition_path(table, day, key))

    def write(self, table: str, day: str, key: str, batches: Iterable[pa.RecordBatch] | pa.Table, schema: pa.Schema) -> int:
        """Replace one attempt's partition of `table` with `batches` (streamed); return the row count."""
        if isinstance(batches, pa.Table):
            schema, batches = batches.schema, batches.to_batches(max_chunksize=_ROWS_PER_GROUP)
        with self.partition_writer(table, day, key, schema) as writer:
            for batch in batches:
                writer.write(batch)
        return writer.rows

    def partition_writer(self, table: str, day: str, key: str, schema: pa.Schema, name: str = "part") -> "PartitionWriter":
        """A writer that replaces one attempt's partition of `table`: the old files go now, `write` appends
        batches, `close` finishes (idempotent). Files are written directly (pyarrow's write_dataset costs ~80 ms of
        set-up per call, more than most partitions take); a partition with no rows still gets one empty file, so
        readers see its schema. A writer with another `name` adds its files to the partition instead (the parts of a
        big file landed by other processes)."""
        path = self.partition_path(table, day, key)
        if name == "part" and self.fs.exists(path):
            # delete first: a re-land with fewer files must not leave the old ones behind
            self.fs.rm(path, recursive=True)
        self.fs.makedirs(path, exist_ok=True)
        return PartitionWriter(self.fs, path, schema, name)

    def remove_attempt(self, day: str, key: str) -> None:
        """Every partition of one attempt, in every table folder (also of tables an older version wrote); the files
        connectors staged for it are not a table and stay."""
        for folder in self.fs.glob(posixpath.join(self._root_path, "*", f"day={day}", f"attempt_key={key}")):
            if folder.split("/")[-3] != STAGED:
                self.fs.rm(folder, recursive=True)

    def files(self, table: str, day: str, key: str) -> list[str]:
        return self.partition_files(table, [(day, key)])

    def partition_files(self, table: str, partitions: Sequence[tuple[str, str]]) -> list[str]:
        """The Parquet files (URLs) of these (day, attempt key) partitions of `table`, partition by partition in the
        given order. One listing per day, or per partition when it is its day's only one: a glob per partition
        compiles a pattern and lists a folder, which cost seconds per night over a fleet's attempts."""
        keys_by_day: dict[str, set[str]] = {}
        for day, key in partitions:
            keys_by_day.setdefault(day, set()).add(key)
        found: dict[tuple[str, str], list[str]] = {}
        for day, keys in keys_by_day.items():
            folder = (self.partition_path(table, day, next(iter(keys))) if len(keys) == 1
                      else posixpath.join(self._root_path, table, f"day={day}"))
            for path in self.fs.find(folder):
                partition, name = posixpath.split(path)
                key = posixpath.basename(partition).removeprefix("attempt_key=")
                if name.endswith(".parquet") and key in keys and partition == self.partition_path(table, day, key):
                    found.setdefault((day, key), []).append(self.fs.unstrip_protocol(path))
        return [url for partition in dict.fromkeys(partitions) for url in sorted(found.get(partition, []))]

    def read(self, table: str, day: str, key: str) -> pa.Table | None:
        files = self.files(table, day, key)
        if not files:
            return None
        # through pyarrow.parquet: pyarrow.dataset (~30 ms of start-up) is then imported only by a read
        return pq.read_table([self.fs._strip_protocol(f) for f in files], filesystem=self.fs, partitioning=None)

    def glob_url(self, table: str) -> str:
        return self.fs.unstrip_protocol(posixpath.join(self._root_path, table)) + "/*/*/*.parquet"


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
    """<name>-0.parquet, <name>-1.parquet, ... of one partition, a new file every _ROWS_PER_FILE rows."""

    def __init__(self, fs, folder: str, schema: pa.Schema, name: str = "part"):
        self.fs, self.folder, self.schema, self.name = fs, folder, schema, name
        self.files = 0
        self.file_rows = 0
        self.rows = 0
        self.closed = False
        self._sink = self._writer = None

    def _open(self) -> None:
        self._finish_file()
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
        if self.files == 0:
            self._open()  # an empty partition still carries its schema
        self._finish_file()
        self.closed = True

    def __enter__(self) -> "PartitionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
