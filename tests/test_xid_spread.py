"""An "application or GPU" Xid decided by its spread (issue 34, family 6), end to end through one warehouse.

A generated family of cases, each in its own cluster: k other workloads (0..3) whose attempts on earlier days logged
Xid 13 on one GPU alone, then the attempt under test with Xid 13 on that GPU alone or on two GPUs; near misses (with
k = 2, on one GPU) put the history on another GPU of the node, make it retries of the same workload, or spread it over
several GPUs of the other attempts.
History attempts are attributed and stored first, like earlier `attribute` calls or nights; the attempts under test
then read the warehouse. The verdicts do not depend on the order or grouping the attempts under test are processed in;
`nightly` and the API reach the same verdicts through the same warehouse.
"""
from __future__ import annotations

import itertools
from datetime import date
from pathlib import Path

import duckdb
import pytest
import yaml
from firstfault.connectors.static_context import context_from_dict

from firstfault.config import Config, LakeSettings, WarehouseSettings, resolve_config
from firstfault.rules_sql import gpu_history
from firstfault.rules_sql.cases import Case, write_case
from firstfault.nightly import run_nights
from test_api import Server, with_api
from firstfault.run import attribute, land, run_attempts

GPUS = ("0000:1b:00", "0000:3b:00")
VARIANTS = ("same_gpu", "other_gpu", "same_workload", "spread_elsewhere")


def _xid(day: int, hour: int, node: str, gpu: str) -> str:
    return (f"Nov {day} {hour:02d}:40:03 {node} kernel: NVRM: Xid (PCI:{gpu}): 13, Graphics SM Warp Exception on "
            "(GPC 2, TPC 0, SM 0): Out Of Range Address")


def _dcgm_xid(day: int, hour: int, node: str, gpu: str) -> list[str]:
    """DCGM's Xid field on `gpu` going from 0 to 13 (its CSV rows, DCGM's form of the PCI id)."""
    dcgm_gpu = f"0000{gpu.upper()}.0"
    return [f"2026-11-{day:02d}T{hour:02d}:40:{s:02d}Z,{node},DCGM_FI_DEV_XID_ERRORS,{v},{dcgm_gpu}," for s, v in ((0, 0), (30, 13))]


def _attempt(root: Path, cluster: str, workload: str, day: int, xids: list[tuple[str, str]], hour: int = 1,
             dcgm: list[tuple[str, str]] = ()):
    """An attempt of `workload` on node-01/node-02 on Nov `day` (its attempt number) from `hour` for an hour, whose
    syslog has Xid 13 on each (node, gpu) of `xids` and whose DCGM metrics report it on each of `dcgm`; its spec is
    written beside its logs (a catalog entry)."""
    logs: dict[str, list[str]] = {}
    for node, gpu in xids:
        logs.setdefault(f"syslog/{node}", []).append(_xid(day, hour, node, gpu))
    metrics = tuple(["ts,node,metric,value,gpu,port"] + [row for node, gpu in dcgm for row in _dcgm_xid(day, hour, node, gpu)]
                    if dcgm else ())
    context = {"cluster": cluster, "workload_id": workload, "attempt": day, "start": f"2026-11-{day:02d}T{hour:02d}:00:00Z",
               "end": f"2026-11-{day:02d}T{hour + 1:02d}:00:00Z"}
    case = Case("spread", f"{cluster}-{workload}-{day}", "positive", context, logs, {}, root, metrics)
    folder = root / case.name
    doc = write_case(case, folder)
    (folder / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=True), encoding="utf-8")
    return context_from_dict(doc, str(folder / "spec.yaml"), str(folder))


def _family(root: Path):
    """(history contexts, {cluster: (context under test, expected subdomain)}) of every generated case."""
    history, tested = [], {}
    combinations = [*itertools.product(range(4), (1, 2), VARIANTS[:1]), *itertools.product((2,), (1,), VARIANTS[1:])]
    for k, gpus, variant in combinations:
        cluster = f"k{k}-gpus{gpus}-{variant}"
        for i in range(k):
            workload = "llm" if variant == "same_workload" else f"other-{i}"
            xids = [("node-02", GPUS[1] if variant == "other_gpu" else GPUS[0])]
            if variant == "spread_elsewhere":  # that workload's other GPUs logged it too: it followed that application
                xids.append(("node-01", GPUS[0]))
            history.append(_attempt(root, cluster, workload, 20 + i, xids))
        xids = [("node-02", GPUS[0])] + ([("node-01", GPUS[0])] if gpus == 2 else [])
        follows_gpu = k >= 1 and gpus == 1 and variant == "same_gpu"
        tested[cluster] = (_attempt(root, cluster, "llm", 29, xids), "gpu" if follows_gpu else "cuda_error")
    return history, tested


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    root = tmp_path_factory.mktemp("spread")
    config = Config(lake=LakeSettings(str(root / "lake")), warehouse=WarehouseSettings(str(root / "warehouse.duckdb")))
    history, tested = _family(root)
    run_attempts(history, config, flow="attempt")
    land([ctx for ctx, _ in tested.values()], config)
    return config, tested


def _subdomains(result, tested) -> dict[str, str]:
    by_id = {row["attempt_id"]: row for row in result.tables["attributions"].to_pylist()}
    return {cluster: by_id[ctx.attempt_id]["subdomain"] for cluster, (ctx, _) in tested.items()
            if ctx.attempt_id in by_id}


def test_the_spread_decides_an_application_or_gpu_xid(family):
    config, tested = family
    contexts = [ctx for ctx, _ in tested.values()]
    result = run_attempts(contexts, config, flow="attempt")
    rows = {row["attempt_id"]: row for row in result.tables["attributions"].to_pylist()}
    wrong = []
    for cluster, (ctx, want) in sorted(tested.items()):
        row = rows[ctx.attempt_id]
        got = (row["domain"], row["subdomain"], row["action"] if want == "gpu" else None)
        expected = ("hardware", "gpu", "drain_node") if want == "gpu" else ("application", "cuda_error", None)
        if got != expected:
            wrong.append(f"{cluster}: expected {expected}, got {got}")
    assert not wrong, "\n".join(wrong)
    gpu = [row for row in rows.values() if row["subdomain"] == "gpu"]
    assert gpu and all(row["granularity"] == "gpu" and row["culprit_nodes"] == ["node-02"] for row in gpu)


def test_the_verdicts_do_not_depend_on_order_or_grouping(family):
    config, tested = family
    contexts = [ctx for ctx, _ in tested.values()]
    together = _subdomains(attribute(contexts, config), tested)
    reversed_ = _subdomains(attribute(contexts[::-1], config), tested)
    one_by_one = {}
    for ctx in contexts[:2]:  # alone, as separate shards would see them
        one_by_one.update(_subdomains(attribute([ctx], config), {c: t for c, t in tested.items() if t[0] is ctx}))
    assert together == reversed_
    assert one_by_one == {c: s for c, s in together.items() if c in one_by_one}
    assert together == {c: want for c, (_, want) in tested.items()}


def test_nightly_sees_earlier_nights_and_never_the_same_night_whatever_the_shards(tmp_path):
    """Night 20: `vision` logs Xid 13 on node-02's GPU alone. Night 29: `llm` logs it on that GPU (cluster a: the GPU),
    and on cluster b two workloads hit one GPU the same night, the second after the first ended: neither sees the
    other, in two shards or one, on the first run or a forced re-run."""
    catalog = tmp_path / "catalog"
    gpu = [("node-02", GPUS[0])]
    _attempt(catalog, "a", "vision", 20, gpu)
    _attempt(catalog, "a", "llm", 29, gpu)
    _attempt(catalog, "b", "first", 29, gpu, hour=1)
    _attempt(catalog, "b", "second", 29, gpu, hour=3)
    verdicts = []
    for shards, force in ((2, False), (2, True), (1, True)):
        config = Config(lake=LakeSettings(str(tmp_path / "lake")), warehouse=WarehouseSettings(str(tmp_path / "wh.duckdb")))
        run_nights(config, [date(2026, 11, 20), date(2026, 11, 29)], str(catalog), force=force, shards=shards)
        con = duckdb.connect(config.warehouse.path, read_only=True)
        try:
            verdicts.append(con.execute("SELECT attempt_id, domain, subdomain, action FROM attributions "
                                        "WHERE day = '2026-11-29' ORDER BY attempt_id").fetchall())
        finally:
            con.close()
    assert verdicts[0] == [("a/llm/29", "hardware", "gpu", "drain_node"),
                           ("b/first/29", "application", "cuda_error", "restart"),
                           ("b/second/29", "application", "cuda_error", "restart")]
    assert verdicts[1] == verdicts[0] and verdicts[2] == verdicts[0]


def test_an_xid_dcgm_reported_is_history_and_is_decided_by_it(tmp_path):
    """Night 20: `vision`'s Xid 13 on node-02's GPU is known only from DCGM's Xid field. Night 29: `llm` reports it on
    that GPU alone, by DCGM (`dcgm`) or by the kernel (`kernel`): both follow the GPU; `quiet`, on another GPU, does
    not."""
    catalog, gpu = tmp_path / "catalog", ("node-02", GPUS[0])
    history = [_attempt(catalog, "d", "vision", 20, [], dcgm=[gpu])]
    tested = [_attempt(catalog, "d", "dcgm", 29, [], dcgm=[gpu]), _attempt(catalog, "d", "kernel", 29, [gpu], hour=3),
              _attempt(catalog, "d", "quiet", 29, [], hour=5, dcgm=[("node-02", GPUS[1])])]
    config = Config(lake=LakeSettings(str(tmp_path / "lake")), warehouse=WarehouseSettings(str(tmp_path / "wh.duckdb")))
    run_attempts(history, config, flow="attempt")
    rows = run_attempts(tested, config, flow="attempt").tables["attributions"].to_pylist()
    got = sorted((row["workload_id"], row["domain"], row["subdomain"], row["action"]) for row in rows)
    assert got == [("dcgm", "hardware", "gpu", "drain_node"), ("kernel", "hardware", "gpu", "drain_node"),
                   ("quiet", "application", "cuda_error", "restart")]


def test_the_history_lookup_asks_only_for_the_gpus_the_attempts_own_xids_name(family, monkeypatch):
    """Cost follows evidence: the warehouse is asked about the (cluster, node, GPU) of the attempt's own "application
    or GPU" Xids, over the window only, and not at all for an attempt without one."""
    config, tested = family
    asked = []
    monkeypatch.setattr(gpu_history, "gpu_xid_history", lambda path, wanted, codes: asked.append((wanted, set(codes))))
    ctx, _ = tested["k1-gpus2-same_gpu"]
    attribute([ctx], config)
    (wanted, codes), = asked
    assert sorted((w[0], w[1], w[2]) for w in wanted) == [("k1-gpus2-same_gpu", "node-01", GPUS[0]),
                                                         ("k1-gpus2-same_gpu", "node-02", GPUS[0])]
    assert {str(w[3]) for w in wanted} == {"2026-11-15 01:00:00"} and {str(w[4]) for w in wanted} == {"2026-11-29 00:00:00"}
    assert {13, 31} <= codes and not {43, 48, 79} & codes
    asked.clear()
    quiet = _attempt(Path(config.lake.root).parent, "quiet", "llm", 29, [])
    land([quiet], config)
    attribute([quiet], config)
    assert asked == []


def test_the_api_sees_the_gpu_follow_from_an_earlier_request(tmp_path):
    """Two POST /v1/attribute into one server's warehouse: another workload's Xid 13 on the GPU on an earlier day, then
    this one's on it alone -> hardware/gpu, drain."""
    specs = tmp_path / "specs"
    gpu = [("node-02", GPUS[0])]
    _attempt(specs, "api", "vision", 20, gpu)
    _attempt(specs, "api", "llm", 29, gpu)
    config = resolve_config(None, lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "wh.duckdb"))
    verdicts = []
    with Server(with_api(config, allowed_roots=(str(specs),))) as api:
        for name in ("api-vision-20", "api-llm-29"):
            folder = specs / name
            status, verdict = api.request("POST", "/v1/attribute", {**yaml.safe_load((folder / "spec.yaml").read_text()),
                                                                    "base_dir": str(folder)})
            assert status == 200, verdict
            verdicts.append((verdict["domain"], verdict["subdomain"], verdict["granularity"], verdict["action"]))
    assert verdicts == [("application", "cuda_error", "gpu", "restart"), ("hardware", "gpu", "gpu", "drain_node")]
