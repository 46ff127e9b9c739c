"""The execution context's GPU model comes from the logs when the scheduler gave none (transforms/patterns/
gpu_inventory.yaml, firstfault/landing.py `logged_gpu_models`)."""
import polars as pl
import yaml

from conftest import warehouse_rows
from firstfault.config import Config, LakeSettings, WarehouseSettings
from firstfault.connectors.static_context import load_static_context
from firstfault.transforms.attempt_context import logged_gpu_models
from firstfault.run import run_attempts

APPLOG = [
    "+ nvidia-smi -L",
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4b6f1c2e-5a3d-7e8f-9a0b-1c2d3e4f5a6b)",
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)",
    "[2026-11-29 01:40:00,000] [INFO] step 1200 done",
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 88, in <module>',
    "ValueError: corrupt shard /data/shard-00042.jsonl",
]


def write_attempt(folder, workload_id: str, gpu_model: str | None) -> str:
    folder.mkdir()
    (folder / "train.log").write_text("\n".join(APPLOG) + "\n", encoding="utf-8")
    spec = {"workload_id": workload_id, "cluster": "t", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z",
            "state": "FAILED", "nodes": ["node-01"], "gpus_per_node": 8, "logs": [{"source": "applog", "path": "train.log"}]}
    if gpu_model:
        spec["gpu_model"] = gpu_model
    (folder / "attempt.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(folder / "attempt.yaml")


def test_an_attempt_without_a_scheduler_gpu_model_takes_it_from_nvidia_smi(tmp_path):
    specs = [write_attempt(tmp_path / "unknown", "no-model", None), write_attempt(tmp_path / "known", "scheduler-model", "A100")]
    config = Config(lake=LakeSettings(str(tmp_path / "lake")), warehouse=WarehouseSettings(str(tmp_path / "w.duckdb")))
    run_attempts([load_static_context(s) for s in specs], config, flow="test")
    rows = warehouse_rows(config.warehouse.path, "SELECT workload_id, gpu_model, domain, subdomain FROM attributions ORDER BY 1")
    # the scheduler's model is kept even when the logs say otherwise; the lines do not change the verdict
    assert rows == [{"workload_id": "no-model", "gpu_model": "H100", "domain": "application", "subdomain": "exception"},
                    {"workload_id": "scheduler-model", "gpu_model": "A100", "domain": "application", "subdomain": "exception"}]


def test_the_most_named_model_wins_and_ties_are_broken_by_name():
    def events(attempt, *models):
        return pl.DataFrame({"attempt_id": attempt, "kind": ["gpu_model"] * len(models) + ["xid"],
                             "fields": [f'{{"model":"{m}"}}' if m else '{"product":"NVIDIA RTX 6000 Ada Generation"}' for m in models]
                             + ['{"model":"B200"}']})

    both = pl.concat([events("a", "A100", "H100", "H100", None, None, None), events("b", "H100", "A100"), events("c", None)])
    assert logged_gpu_models(both) == {"a": "H100", "b": "A100"}
