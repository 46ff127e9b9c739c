"""The `gpu_xid_history` relation the view xid_class (_views.sql) decides an "application or GPU" Xid by (docs/DESIGN.md
§4.2 item 8), whether the kernel or DCGM reported it."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from firstfault.warehouse.read import gpu_xid_history

#: "application or GPU" Xids that earlier attempts logged on the GPUs the run's own such Xids name (`gpus`: how many
#: GPUs of that attempt logged one); _views.sql declares the same columns for passes that register none
GPU_HISTORY_COLUMNS = (
    "cluster VARCHAR, workload_id VARCHAR, attempt_id VARCHAR, node VARCHAR, gpu VARCHAR, ts TIMESTAMP, "
    "end_ts TIMESTAMP, gpus BIGINT"
)


def register_gpu_history(con: duckdb.DuckDBPyConnection, warehouse: str, days: float, rows: Sequence[dict] | None = None) -> None:
    """The `gpu_xid_history` relation: the "application or GPU" Xids that other attempts logged on the GPUs this run's
    own such Xids name, within `days` (`[attribution] gpu_history_days`) before each attempt, from attempts that ended
    on an earlier UTC day (earlier nights: the verdict never depends on the order one night's attempts are processed
    in); from the warehouse at `warehouse` (read-only) or from `rows`."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE gpu_xid_history ({GPU_HISTORY_COLUMNS})")
    if rows is not None:
        names = [c.split()[0] for c in GPU_HISTORY_COLUMNS.split(", ")]
        if rows:
            con.executemany(f"INSERT INTO gpu_xid_history VALUES ({', '.join('?' for _ in names)})",
                            [[row.get(n) for n in names] for row in rows])
        return
    wanted = con.execute(
        "SELECT a.cluster, e.node, e.gpu, min(a.start_ts) - to_microseconds(CAST(? * 86400e6 AS BIGINT)), "
        "max(date_trunc('day', coalesce(a.end_ts, a.start_ts))) "
        "FROM events_all e JOIN attempts a USING (attempt_id) JOIN xid_catalog c ON c.code = e.code "
        "WHERE e.kind IN ('xid', 'dcgm_xid') AND c.spread_subdomain IS NOT NULL AND e.node IS NOT NULL AND e.gpu IS NOT NULL "
        "AND a.cluster IS NOT NULL AND a.start_ts IS NOT NULL GROUP BY ALL ORDER BY ALL",
        [days]).fetchall()
    if not wanted or not Path(warehouse).exists():
        return
    codes = [c for (c,) in con.execute("SELECT code FROM xid_catalog WHERE spread_subdomain IS NOT NULL").fetchall()]
    table = gpu_xid_history(warehouse, wanted, codes)
    if table is not None:
        con.register("gpu_history_warehouse", table)
        con.execute("INSERT INTO gpu_xid_history SELECT * FROM gpu_history_warehouse")
        con.unregister("gpu_history_warehouse")
