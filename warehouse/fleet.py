"""Fleet aggregates over the whole warehouse: `node_offenders`, `port_hotspots`, `gpu_model_trends`, `incidents`.

`rebuild()` opens the warehouse as the single writer, runs the blocks of `warehouse/fleet.sql` and replaces the four
tables in one transaction. Thresholds come from `[fleet]` in firstfault.toml (`firstfault.config.FleetSettings`).

Poisson intervals: the exact (Garwood) 95 % interval for k events over an exposure T,
[χ²₀.₀₂₅(2k)/2T, χ²₀.₉₇₅(2k+2)/2T], computed without scipy by bisection on the Poisson CDF (terms in log space with
`math.lgamma`): χ²_p(2k)/2 is the λ with P(X ≥ k; λ) = p, and χ²_{1-p}(2k+2)/2 the λ with P(X ≤ k; λ) = p. Bisection
runs to a relative width of 1e-12, so the bounds are exact to printing precision.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import replace
from datetime import date
from importlib import resources
from pathlib import Path

import pyarrow as pa
import yaml
from firstfault.warehouse.store import connect_writer

from firstfault import yamlio
from firstfault.config import Config, FleetSettings
from firstfault.errors import BadInput
from firstfault.schema import FLEET_TABLES

_LEVEL = 0.95


# ------------------------------------------------------------------------------------------------ Poisson interval
def _poisson_cdf(k: int, lam: float) -> float:
    """P(X <= k) for X ~ Poisson(lam), summed in log space."""
    if lam <= 0:
        return 1.0
    log_lam = math.log(lam)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(i * log_lam - lam - math.lgamma(i + 1))
    return min(total, 1.0)


def _bisect(f, lo: float, hi: float) -> float:
    """Root of an increasing f on [lo, hi] (f(lo) < 0 < f(hi))."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(hi, 1e-300):
            break
    return (lo + hi) / 2


def poisson_interval(k: int, level: float = _LEVEL) -> tuple[float, float]:
    """Exact two-sided interval for the mean of a Poisson count k: (χ²_{α/2}(2k)/2, χ²_{1-α/2}(2k+2)/2)."""
    if k < 0:
        raise ValueError("k must be >= 0")
    alpha = 1.0 - level
    hi_start = max(10.0, 2.0 * k + 20.0 * math.sqrt(k + 1) + 10.0)
    # upper: P(X <= k; λ) = α/2, decreasing in λ
    upper = _bisect(lambda lam: alpha / 2 - _poisson_cdf(k, lam), 0.0, hi_start)
    if k == 0:
        return 0.0, upper
    # lower: P(X >= k; λ) = 1 - P(X <= k-1; λ) = α/2, increasing in λ
    lower = _bisect(lambda lam: (1.0 - _poisson_cdf(k - 1, lam)) - alpha / 2, 0.0, hi_start)
    return lower, upper


def rate_interval(k: int, gpu_hours: float, level: float = _LEVEL) -> tuple[float | None, float | None, float | None]:
    """(rate, lower, upper) per 1,000 GPU-hours; None without exposure."""
    if not gpu_hours or gpu_hours <= 0:
        return None, None, None
    lo, hi = poisson_interval(k, level)
    per = 1000.0 / gpu_hours
    return k * per, lo * per, hi * per


# ------------------------------------------------------------------------------------------------ topology
_TOPO_SCHEMA = pa.schema([("node", pa.string()), ("device", pa.string()), ("switch", pa.string()), ("switch_port", pa.string())])


def load_topology(path: str | None) -> pa.Table:
    """node -> leaf switch and switch port (optionally per NIC `device`), from CSV (header node,switch,port[,device])
    or YAML (`nodes: {node-01: {switch: leaf-1, port: 7}}` or a list of {node, switch, port[, device]})."""
    rows: list[dict] = []
    if path:
        p = Path(path)
        if not p.is_file():
            raise BadInput(path, "topology", "file not found")
        text = p.read_text(encoding="utf-8")
        if p.suffix.lower() == ".csv":
            entries = list(csv.DictReader(text.splitlines()))
        else:
            try:
                doc = yamlio.safe_load(text)
            except yaml.YAMLError as e:
                raise BadInput(path, "topology", yamlio.describe_error(e)) from None
            if isinstance(doc, dict) and "nodes" in doc:
                doc = doc["nodes"]
            if isinstance(doc, dict):
                entries = [{"node": k, **(v if isinstance(v, dict) else {"switch": v})} for k, v in doc.items()]
            elif isinstance(doc, list):
                entries = doc
            else:
                raise BadInput(path, "topology", "expected a mapping node -> {switch, port} or a list of entries")
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not e.get("node") or not e.get("switch"):
                raise BadInput(path, f"topology[{i}]", "needs node and switch")
            port = e.get("port", e.get("switch_port"))
            rows.append({"node": str(e["node"]), "device": str(e["device"]) if e.get("device") not in (None, "") else None,
                         "switch": str(e["switch"]), "switch_port": None if port in (None, "") else str(port)})
    return pa.Table.from_pylist(rows, schema=_TOPO_SCHEMA)


# ------------------------------------------------------------------------------------------------ rebuild
def fleet_sql_blocks() -> list[tuple[str, str]]:
    """(name, statement) for every `-- block: name` of warehouse/fleet.sql, in order."""
    text = (resources.files("firstfault.warehouse") / "fleet.sql").read_text(encoding="utf-8")
    parts = re.split(r"^-- block: (\w+)[ \t]*$", text, flags=re.MULTILINE)
    return [(name, body.strip().rstrip(";")) for name, body in zip(parts[1::2], parts[2::2])]


def _params(settings: FleetSettings, run_day: date) -> pa.Table:
    try:
        exempt = [int(x) for x in settings.xid_repeat_exempt.replace(" ", "").split(",") if x]
    except ValueError:
        raise BadInput("firstfault.toml", "fleet.xid_repeat_exempt", "must be comma-separated Xid numbers") from None
    row = {
        "run_day": run_day, "short_window_days": settings.short_window_days, "long_window_days": settings.long_window_days,
        "drain_count": settings.drain_count, "drain_window_days": settings.drain_window_days,
        "xid_repeat_count": settings.xid_repeat_count, "xid_exempt": exempt, "watch_count": settings.watch_count,
        "incident_min_attempts": settings.incident_min_attempts, "nic_min_peers": settings.nic_min_peers,
        "switch_min_nodes": settings.switch_min_nodes,
    }
    schema = pa.schema([("run_day", pa.date32())] + [
        (k, pa.list_(pa.int64()) if k == "xid_exempt" else pa.int64()) for k in row if k != "run_day"])
    return pa.Table.from_pylist([row], schema=schema)


_TRENDS_SCHEMA = pa.schema([
    ("gpu_model", pa.string()), ("iso_week", pa.string()), ("domain", pa.string()), ("attempts", pa.int64()),
    ("gpu_hours", pa.float64()), ("failures", pa.int64()), ("rate_per_1k_gpu_hours", pa.float64()),
    ("rate_lower", pa.float64()), ("rate_upper", pa.float64()), ("mtbf_gpu_hours", pa.float64()),
    ("interval_level", pa.float64()), ("run_day", pa.date32()),
])


def _trends(rows: list[tuple], run_day: date) -> pa.Table:
    out = []
    for gpu_model, iso_week, domain, attempts, gpu_hours, failures in rows:
        rate, lo, hi = rate_interval(int(failures), float(gpu_hours or 0.0))
        out.append({"gpu_model": gpu_model, "iso_week": iso_week, "domain": domain, "attempts": attempts,
                    "gpu_hours": float(gpu_hours or 0.0), "failures": failures, "rate_per_1k_gpu_hours": rate,
                    "rate_lower": lo, "rate_upper": hi,
                    "mtbf_gpu_hours": (float(gpu_hours) / failures) if failures and gpu_hours else None,
                    "interval_level": _LEVEL, "run_day": run_day})
    return pa.Table.from_pylist(out, schema=_TRENDS_SCHEMA)


def rebuild(warehouse_path: str, config: Config | None = None, *, day: str | None = None,
            topology: str | None = None) -> dict[str, int]:
    """Replace the fleet tables of the warehouse (one transaction); returns the row count of each table.

    `day` (YYYY-MM-DD) is where the rolling windows end; default: the latest attempt day in the warehouse (never the
    wall clock, so rebuilding the same warehouse gives the same rows). `topology` overrides `[fleet] topology`."""
    settings = (config or Config()).fleet
    if topology is not None:
        settings = replace(settings, topology=topology)
    topo = load_topology(settings.topology or None)
    con = connect_writer(warehouse_path)
    try:
        if day:
            try:
                run_day = date.fromisoformat(day)
            except ValueError:
                raise BadInput(day, "day", "must be YYYY-MM-DD") from None
        else:
            latest = con.execute(
                "SELECT max(coalesce(CAST(end_ts AS DATE), TRY_CAST(day AS DATE))) FROM attributions").fetchall()[0][0]
            run_day = latest or date(1970, 1, 1)
        con.register("fleet_params_in", _params(settings, run_day))
        con.register("topology_in", topo)
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("CREATE OR REPLACE TEMP TABLE fleet_params AS SELECT * FROM fleet_params_in")
            con.execute("CREATE OR REPLACE TEMP TABLE topology AS SELECT * FROM topology_in")
            for name, sql in fleet_sql_blocks():
                con.execute(sql)
                if name == "_trend_counts":
                    rows = con.execute(
                        "SELECT gpu_model, iso_week, domain, attempts, gpu_hours, failures FROM _trend_counts "
                        "ORDER BY gpu_model, iso_week, domain").fetchall()
                    con.register("trends_in", _trends(rows, run_day))
                    con.execute("CREATE OR REPLACE TABLE gpu_model_trends AS SELECT * FROM trends_in "
                                "ORDER BY gpu_model, iso_week, domain")
                    con.unregister("trends_in")
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        con.execute("CHECKPOINT")
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in FLEET_TABLES}
    finally:
        con.close()
