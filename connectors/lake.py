"""The Parquet lake: one fsspec root, hive partitions day=/attempt= per table (docs/DESIGN.md §2)."""
from __future__ import annotations

import posixpath
from collections.abc import Iterable

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

TABLES = ("logs", "events", "metrics", "context", "inputs")


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
        path = self.partition_path(table, day, key)
        if self.fs.exists(path):
            # delete first: a re-land with zero rows must not leave the old files behind
            self.fs.rm(path, recursive=True)
        counter = _Counter()
        source = batches if isinstance(batches, pa.Table) else pa.RecordBatchReader.from_batches(schema, counter.wrap(batches))
        ds.write_dataset(
            source,
            path,
            format="parquet",
            file_options=_parquet_options(schema),
            filesystem=self.fs,
            basename_template="part-{i}.parquet",
            existing_data_behavior="delete_matching",
            max_rows_per_file=4_000_000,
            max_rows_per_group=256 * 1024,
            min_rows_per_group=64 * 1024,
            create_dir=True,
        )
        rows = source.num_rows if isinstance(source, pa.Table) else counter.rows
        if rows == 0:
            # write_dataset writes no file for no rows; readers still need the partition and its schema
            self.fs.makedirs(path, exist_ok=True)
            with self.fs.open(posixpath.join(path, "part-0.parquet"), "wb") as f:
                pq.write_table(schema.empty_table(), f)
        return rows

    def files(self, table: str, day: str, key: str) -> list[str]:
        path = self.partition_path(table, day, key)
        if not self.fs.exists(path):
            return []
        return sorted(self.fs.unstrip_protocol(p) for p in self.fs.glob(posixpath.join(path, "*.parquet")))

    def read(self, table: str, day: str, key: str) -> pa.Table | None:
        files = self.files(table, day, key)
        if not files:
            return None
        return ds.dataset([self.fs._strip_protocol(f) for f in files], format="parquet", filesystem=self.fs).to_table()

    def glob_url(self, table: str) -> str:
        return self.fs.unstrip_protocol(posixpath.join(self._root_path, table)) + "/*/*/*.parquet"


# Free text never repeats: dictionary-encoding it only costs time.
_FREE_TEXT = {"raw", "message", "msg", "text", "fields", "summary", "locator"}


def _parquet_options(schema: pa.Schema):
    dictionary = [f.name for f in schema if f.name not in _FREE_TEXT]
    return ds.ParquetFileFormat().make_write_options(compression="zstd", compression_level=1, use_dictionary=dictionary)


class _Counter:
    rows = 0

    def wrap(self, batches):
        for b in batches:
            self.rows += b.num_rows
            yield b
