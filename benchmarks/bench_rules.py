"""Rules benchmark: the whole rule set over the events of >= 10,000 attempts in one DuckDB pass.

The events are those of the demo attempts (every failure class of the demo), landed once and replicated under new
attempt ids. Prints attempts/s (target >= 1,000 on 2 cores) and peak memory.

    .venv/bin/python benchmarks/bench_rules.py [--attempts 10000]
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import duckdb
import polars as pl

from firstfault.rules_sql.engine import load_rules, register_empty_inputs, register_reference, rules_version, run_rules
from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.synthetic.demo import write_demo
from firstfault.run import land


#: lake table -> the relation the rule pass reads it as
LAKE_RELATIONS = {"events": "events_all", "context": "attempts_raw", "connector_reports": "reports", "metrics": "metrics",
                  "progress": "progress"}


def replicated(frame: pl.DataFrame, copies: int) -> pl.DataFrame:
    ids = pl.DataFrame({"copy": list(range(copies))})
    return frame.join(ids, how="cross").with_columns(
        attempt_id=pl.concat_str(pl.col("attempt_id"), pl.lit("#"), pl.col("copy").cast(pl.String))
    ).drop("copy")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        specs = write_demo(tmp)
        contexts = [load_static_context(str(p)) for p in specs]
        config = Config(lake=LakeSettings(f"{tmp}/lake"), warehouse=WarehouseSettings(f"{tmp}/w.duckdb"))
        land(contexts, config)
        lake = Path(tmp) / "lake"
        # a lake table with no rows has no files (the demo has no metrics)
        read = {t: pl.read_parquet(files, hive_partitioning=False) for t in LAKE_RELATIONS
                if (files := sorted((lake / t).rglob("*.parquet")))}
    copies = -(-args.attempts // len(contexts))
    tables = {name: replicated(frame, copies) for name, frame in read.items()}
    n_attempts = tables["context"].height
    rules = load_rules()
    con = duckdb.connect()
    register_empty_inputs(con)
    for name, frame in tables.items():
        con.register("_replicated", frame)
        con.execute(f"INSERT INTO {LAKE_RELATIONS[name]} BY NAME SELECT * FROM _replicated")
        con.unregister("_replicated")
    started = time.perf_counter()
    con.execute("CREATE OR REPLACE TEMP TABLE attempts AS SELECT *, strftime(start_ts, '%Y-%m-%d') AS day FROM attempts_raw")
    register_reference(con, config.attribution, rules_version(rules, config.attribution))
    run_rules(con, rules)
    verdicts = con.execute("SELECT verdict, count(*) FROM verdict_rows GROUP BY ALL ORDER BY ALL").fetchall()
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n_attempts:,} attempts, {tables['events'].height:,} events, {len(rules)} rules: {elapsed:.2f} s = "
          f"{n_attempts / elapsed:,.0f} attempts/s (target >= 1,000); peak memory {peak:,.0f} MB")
    print("verdicts:", verdicts)


if __name__ == "__main__":
    main()
