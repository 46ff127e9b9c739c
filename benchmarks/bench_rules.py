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

from firstfault.rules_sql.engine import load_rules, register_reference, rules_version, run_rules
from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.synthetic.demo import write_demo
from firstfault.run import land


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
        read = {t: pl.read_parquet(lake / t / "**" / "*.parquet", hive_partitioning=False) for t in ("events", "context", "connector_reports", "metrics")}
    copies = -(-args.attempts // len(contexts))
    tables = {name: replicated(frame, copies) for name, frame in read.items()}
    n_attempts = tables["context"].height
    rules = load_rules()
    con = duckdb.connect()
    for name, view in (("events", "events_all"), ("connector_reports", "reports"), ("metrics", "metrics")):
        con.register(view, tables[name])
    con.register("attempts_raw", tables["context"])
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
