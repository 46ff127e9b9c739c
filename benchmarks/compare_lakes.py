"""Whether two lakes hold the same rows: every table of both (`logs`, `progress`, `events` and the rest), all columns,
sorted, compared row for row. The check that a speed change keeps every row: land the same attempts (a simulated
fleet with `firstfault nightly`, a `bench_attempt.py` attempt with `firstfault attribute --static`) before and after
the change, each into its own lake, then

    .venv/bin/python benchmarks/compare_lakes.py LAKE_BEFORE LAKE_AFTER

Prints each table's rows on both sides and the columns that differ; exits 1 when any table differs. Not part of the
CI test run.
"""
from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

TABLES = ("logs", "progress", "events", "context", "connector_reports", "metrics", "flight_recorder")


def table(lake: Path, name: str) -> pl.DataFrame:
    """Every file of the table (a lake of one landing per attempt: one generation, all of it committed)."""
    files = sorted((lake / name).rglob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files], how="vertical_relaxed") if files else pl.DataFrame()


def main(before: str, after: str) -> int:
    same = True
    for name in TABLES:
        a, b = table(Path(before), name), table(Path(after), name)
        if a.height == b.height == 0:  # an older lake's empty files against no files
            print(f"{name:18} rows {0:>10,} and {0:>10,}: identical")
            continue
        if a.columns != b.columns:
            print(f"{name:18} columns differ: {a.columns} against {b.columns}")
            same = False
            continue
        a, b = a.sort(a.columns, nulls_last=True), b.sort(b.columns, nulls_last=True)
        equal = a.equals(b)
        differing = [c for c in a.columns if a.height == b.height and not a[c].equals(b[c])]
        print(f"{name:18} rows {a.height:>10,} and {b.height:>10,}: {'identical' if equal else 'DIFFERENT'}"
              + (f" (columns {', '.join(differing)})" if differing else ""))
        same &= equal
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
