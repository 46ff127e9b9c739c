"""Two runs over the same input give the same rows, and re-landing replaces exactly one attempt."""
import duckdb

from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.run import run_attempts

from conftest import committed_generation

TABLES = {
    "attributions": "SELECT * EXCLUDE (connector_reports, evidence) FROM attributions",
    "attribution_evidence": "SELECT * EXCLUDE (uri) FROM attribution_evidence",
    "events": "SELECT * EXCLUDE (uri) FROM events",
    "connector_reports": "SELECT * EXCLUDE (uri, fingerprint) FROM connector_reports",
}


def snapshot(path):
    con = duckdb.connect(path, read_only=True)
    try:
        return {name: sorted(map(repr, con.execute(q).fetchall())) for name, q in TABLES.items()}
    finally:
        con.close()


def test_rerun_gives_identical_rows(demo_dir, tmp_path):
    specs = sorted((demo_dir / "attempts").glob("*/attempt.yaml"))[:4]
    contexts = [load_static_context(str(p)) for p in specs]
    config = Config(lake=LakeSettings(str(tmp_path / "lake")), warehouse=WarehouseSettings(str(tmp_path / "w.duckdb")))
    run_attempts(contexts, config, flow="test")
    first = snapshot(config.warehouse.path)
    run_attempts(contexts, config, flow="test")
    assert snapshot(config.warehouse.path) == first
    run_attempts(contexts[:1], config, flow="test")  # re-landing one attempt touches only its rows
    assert snapshot(config.warehouse.path) == first
    lake_files = lake_layout(tmp_path / "lake")
    run_attempts(contexts, config, flow="test")
    assert lake_layout(tmp_path / "lake") == lake_files


def lake_layout(lake):
    """The lake's partitions, each with its files named without their generation: a re-landing writes a new generation
    of the same files, and leaves one generation per partition."""
    layout = {}
    for partition in sorted({p.parent for p in lake.rglob("*.parquet")}):
        prefix = f"part-{committed_generation(partition)}-"
        files = sorted(f.name for f in partition.glob("*.parquet"))
        assert all(f.startswith(prefix) for f in files), files
        layout[partition.relative_to(lake)] = [f.removeprefix(prefix) for f in files]
    return layout
