"""One attribution into a fresh warehouse, run by tests/test_determinism.py in a subprocess under a chosen
PYTHONHASHSEED (the seed is fixed when an interpreter starts, so every seed needs a process of its own).

    python determinism_attribute.py cases CASES_DIR WORKDIR          # written fixture cases (contexts + history)
    python determinism_attribute.py nightly CATALOG WORKDIR SHARDS DAY...   # a catalog through the nightly run

The warehouse is WORKDIR/firstfault.duckdb, the lake WORKDIR/lake.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.nightly import parse_run_date, run_nights
from firstfault.run import attribute, land, store


def _config(workdir: Path) -> Config:
    return Config(lake=LakeSettings(root=str(workdir / "lake")), warehouse=WarehouseSettings(path=str(workdir / "firstfault.duckdb")))


def attribute_cases(cases_dir: Path, workdir: Path) -> None:
    """The cases in one run, as `firstfault rules test` runs them, then stored."""
    config = _config(workdir)
    contexts = [load_static_context(str(p)) for p in sorted(cases_dir.glob("case*/context.json"), key=lambda p: int(p.parent.name[4:]))]
    history = json.loads((cases_dir / "history.json").read_text(encoding="utf-8"))
    started = datetime.now(timezone.utc)
    land(contexts, config)
    store(config, attribute(contexts, config, history=history), "determinism", started, len(contexts))


def attribute_nights(catalog: Path, workdir: Path, shards: int, days: list[str]) -> None:
    summaries = run_nights(_config(workdir), [parse_run_date(d) for d in days], str(catalog), shards=shards)
    failed = [s for s in summaries if s["failed"]]
    if failed:
        raise SystemExit(f"attempts failed: {failed}")


if __name__ == "__main__":
    mode, source, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if mode == "cases":
        attribute_cases(source, work)
    else:
        attribute_nights(source, work, int(sys.argv[4]), sys.argv[5:])
