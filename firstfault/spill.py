"""Frames collected over a long pass, held in bounded memory: past a byte budget they go to a temporary Arrow IPC
file and come back when the pass is over.

Landing keeps an attempt's candidate lines (about 1 % of its lines) until every file is read; for an attempt of
gigabytes that would grow with the volume, so the candidates spill to disk beyond the budget.
"""
from __future__ import annotations

import tempfile

import polars as pl
import pyarrow as pa


class SpillingFrames:
    def __init__(self, schema: dict[str, pl.DataType], memory_bytes: int):
        self.schema = schema
        self.memory_bytes = memory_bytes
        self._frames: list[pl.DataFrame] = []
        self._held = 0
        self.added_bytes = 0  # everything added, held or spilled
        self._file = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None

    def add(self, frame: pl.DataFrame) -> None:
        if not frame.height:
            return
        self._frames.append(frame)
        self._held += frame.estimated_size()
        self.added_bytes += frame.estimated_size()
        if self._held > self.memory_bytes:
            self._spill()

    def _spill(self) -> None:
        table = pl.concat(self._frames, how="vertical_relaxed").cast(self.schema).to_arrow()
        if self._writer is None:
            self._file = tempfile.TemporaryFile(prefix="firstfault-spill-")
            self._writer = pa.ipc.new_stream(self._file, table.schema)
        self._writer.write_table(table)
        self._frames, self._held = [], 0

    def frames(self) -> list[pl.DataFrame]:
        """Everything added, in order; the first call reads the spill file back into memory and deletes it."""
        if self._writer is not None:
            self._writer.close()
            self._file.seek(0)
            spilled = pl.from_arrow(pa.ipc.open_stream(self._file).read_all())
            self._file.close()
            self._writer = self._file = None
            self._frames = [spilled, *self._frames]
        return self._frames
