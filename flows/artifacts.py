"""The run summary as Prefect artifacts (the verdicts, one row per attempt, the fleet hot spots), published by the
flows at the end of a run so the Prefect UI shows what the run found."""
from __future__ import annotations

import html
import json
import re
from collections import Counter
from datetime import date, datetime
from decimal import Decimal

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from firstfault.schema import FLEET_TABLES
from firstfault.warehouse.read import existing_tables, query, reading, report_attempts
from firstfault.warehouse.report import FAILED, MAX_ROWS


def summary_markdown(attempts: list[dict], tables: set[str]) -> str:
    verdicts = Counter(a["verdict"] for a in attempts)
    lines = ["# firstfault run summary", "", f"{len(attempts)} attempts: "
             + ", ".join(f"{n} {k}" for k, n in sorted(verdicts.items())), "",
             "| attempt | verdict | domain/subdomain | culprits | action | confidence |", "|---|---|---|---|---|---|"]
    for a in attempts:
        if a["verdict"] in FAILED:
            cells = [a["attempt_id"], a["verdict"], f"{a['domain'] or '-'}/{a['subdomain'] or '-'}",
                     ", ".join(a["culprit_nodes"] or []) or "-", a["action"], (a["quality"] or {}).get("confidence")]
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    missing = [t for t in FLEET_TABLES if t not in tables]
    if missing:
        lines += ["", "Fleet tables not computed yet: " + ", ".join(missing)]
    return "\n".join(lines)


def _md(value) -> str:
    return html.escape(str(value if value is not None else "-")).replace("|", "\\|").replace("\n", " ")


def artifact_key(text: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "firstfault"


def publish_artifacts(warehouse_path: str, *, prefix: str = "firstfault") -> list:
    """Publish the run summary as Prefect artifacts (call from a flow or task); returns the artifact ids."""
    with reading(warehouse_path) as con:
        tables = existing_tables(con)
        attempts = report_attempts(con)
        fleet = {t: query(con, f'SELECT * FROM "{t}" LIMIT {MAX_ROWS}') for t in ("node_offenders", "port_hotspots")
                 if t in tables}
    ids = [create_markdown_artifact(markdown=summary_markdown(attempts, tables), key=artifact_key(f"{prefix}-summary"),
                                    description="firstfault: verdicts of the run")]
    rows = [{"attempt_id": a["attempt_id"], "verdict": a["verdict"], "domain": a["domain"], "subdomain": a["subdomain"],
             "culprit_nodes": ", ".join(a["culprit_nodes"] or []), "action": a["action"],
             "confidence": (a["quality"] or {}).get("confidence"),
             "root_cause": (a["root_cause"] or {}).get("summary")} for a in attempts]
    ids.append(create_table_artifact(table=rows, key=artifact_key(f"{prefix}-attempts"),
                                     description="firstfault: one row per attempt"))
    for name, trows in fleet.items():
        clean = [{k: _plain(v) for k, v in r.items()} for r in trows]
        ids.append(create_table_artifact(table=clean, key=artifact_key(f"{prefix}-{name}"),
                                         description=f"firstfault: {name}"))
    return ids


def _plain(value):
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return value
