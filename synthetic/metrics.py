"""Per-attempt metrics for the fleet simulator (`simulate(..., metrics=True)`): the long CSV format of
connectors/metrics_csv.py (`ts,node,metric,value,gpu,port`), as a DCGM exporter and an InfiniBand port exporter
scraped every few minutes would give it.

Every node of the attempt reports each GPU's temperature, last Xid and double-bit ECC count, and its IB port's
link-downed and link-error-recovery counters. The counters move only where the fault injected into the kernel log
says so: the GPU of an injected Xid shows that Xid (plus one double-bit error for Xid 48 and NVLink errors for Xid
74/149) from the next scrape on; the node of an injected link loss counts one more link-down. A node that went
silent stops reporting. Stamps are the node's own clock, like its kernel log.
"""
from __future__ import annotations

import random
import re
from datetime import datetime, timedelta

from firstfault.synthetic.logwriters import BUS_IDS, GPUS, Scenario

SCRAPE = timedelta(minutes=5)
PORT = "mlx5_0:1"
NVLINK_ERRORS_PER_FAULT = 24  # CRC flit errors counted around one fatal NVLink Xid
_XID = re.compile(r"NVRM: Xid \(PCI:0000:([0-9a-f]{2}):00\): (\d+),")
_LINK_LOST = ("Lost carrier", "Port module event[error]")


def metrics_csv(s: Scenario, roots: list[str], rng: random.Random) -> str:
    """The attempt's metrics file; `roots` are the injected root lines (only they move a counter)."""
    xids, links = _injected(s, roots)
    rows = ["ts,node,metric,value,gpu,port"]
    for node in s.nodes:
        silent = s.silent_after.get(node)
        temps = [rng.uniform(55, 70) for _ in range(GPUS)]
        t = s.start
        while t <= s.end and (silent is None or t < silent):
            stamp = f"{s.local(node, t):%Y-%m-%dT%H:%M:%SZ}"
            for local, bus in enumerate(BUS_IDS[:GPUS]):
                gpu = f"00000000:{bus.upper()}:00.0"
                seen = [(at, code) for at, code in xids.get((node, bus), []) if at < t]
                last = seen[-1][1] if seen else 0
                rows += [f"{stamp},{node},DCGM_FI_DEV_GPU_TEMP,{temps[local] + rng.uniform(-2, 2):.0f},{gpu},",
                         f"{stamp},{node},DCGM_FI_DEV_XID_ERRORS,{last},{gpu},",
                         f"{stamp},{node},DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,{sum(code == 48 for _, code in seen)},{gpu},"]
                rows.append(f"{stamp},{node},DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,"
                            f"{NVLINK_ERRORS_PER_FAULT * sum(code in (74, 149) for _, code in seen)},{gpu},")
            downs = sum(at < t for at in links.get(node, []))
            rows += [f"{stamp},{node},node_infiniband_link_downed_total,{downs},,{PORT}",
                     f"{stamp},{node},node_infiniband_link_error_recovery_total,{downs},,{PORT}"]
            t += SCRAPE
    return "\n".join(rows) + "\n"


def _injected(s: Scenario, roots: list[str]) -> tuple[dict[tuple[str, str], list[tuple[datetime, int]]], dict[str, list[datetime]]]:
    """(node, bus) -> [(time, Xid)] of the injected root Xids; node -> times of its injected link losses."""
    wanted = set(roots)
    xids: dict[tuple[str, str], list[tuple[datetime, int]]] = {}
    links: dict[str, list[datetime]] = {}
    for node, lines in s.kernel.items():
        for at, text in sorted(lines, key=lambda x: x[0]):
            if text not in wanted:
                continue
            if m := _XID.search(text):
                xids.setdefault((node, m.group(1)), []).append((at, int(m.group(2))))
            elif any(mark in text for mark in _LINK_LOST):
                links.setdefault(node, []).append(at)
    return xids, links
