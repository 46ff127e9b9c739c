"""The verdict object (CONTRACTS §3) from warehouse rows, and its human-readable rendering."""
from __future__ import annotations

import json
from collections.abc import Sequence

import duckdb

from firstfault.schema import VERDICT_KEYS

def load_verdicts(con: duckdb.DuckDBPyConnection, attempt_ids: Sequence[str] | None = None) -> list[dict]:
    where = ""
    params: list = []
    if attempt_ids is not None:
        where = "WHERE attempt_id IN (SELECT unnest(?))"
        params = [list(attempt_ids)]
    cursor = con.execute(f"SELECT {', '.join(VERDICT_KEYS)} FROM attributions {where} ORDER BY attempt_id", params)
    names = [d[0] for d in cursor.description]
    return [to_verdict(dict(zip(names, row))) for row in cursor.fetchall()]


def to_verdict(row: dict) -> dict:
    verdict = {k: row[k] for k in VERDICT_KEYS}
    for item in verdict["evidence"] or []:
        locator = item.pop("locator", None)
        if locator:
            item["locator"] = json.loads(locator)
    return verdict


def render(verdicts: Sequence[dict], *, evidence_lines: int = 6) -> str:
    """A table a person can read: one row per attempt, then the cause and its evidence lines for each failure."""
    header = ("attempt", "verdict", "domain/subdomain", "culprits", "action", "confidence")
    rows = [
        (
            v["attempt_id"], v["verdict"],
            f"{v['domain'] or '-'}/{v['subdomain'] or '-'}" if v["domain"] or v["subdomain"] else "-",
            ",".join(v["culprit_nodes"]) or "-", v["action"], v["quality"]["confidence"],
        )
        for v in verdicts
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    out = ["  ".join(str(x).ljust(w) for x, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in rows]
    for v in verdicts:
        if v["verdict"] not in ("attributed", "ambiguous"):
            continue
        out.append("")
        cause = v["root_cause"]["summary"] if v["root_cause"] else "; ".join(
            f"{c['domain']}/{c['subdomain']} on {','.join(c['nodes']) or 'job'} ({c['score']:.2f})" for c in v["candidates"][:4]
        )
        out.append(f"{v['attempt_id']}: {cause}")
        if v["symptoms"]:
            nodes = sorted({s["node"] for s in v["symptoms"] if s["node"]})
            out.append(f"  symptoms: {len(v['symptoms'])} on {', '.join(nodes) or '?'}")
        for e in v["evidence"][:evidence_lines]:
            where = f"{e['uri']}:{e['line']}" if e.get("line") is not None else e["uri"]
            out.append(f"  [{e['role']}] {where}")
            out.append(f"      {(e['text'] or '')[:200]}")
    return "\n".join(out)
