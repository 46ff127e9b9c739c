"""Where verdicts go besides the DuckDB warehouse and stdout: `--output sqlite:PATH` (a SQLite store for tools
that expect one) and `--output jsonl:PATH` (an appended stream of verdict objects for incident management).

Both carry the verdict exactly as `attribute --json` prints it (docs/verdict.md, `schema_version` included): the
warehouse stays the source of truth and these are copies of its rows, written after each load.
"""
from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from firstfault.errors import BadInput
from firstfault.schema import VERDICT_KEYS

# Evidence entries as rows (like the warehouse's attribution_evidence); `position` is the 1-based place in the
# verdict's `evidence` list, `kinds` and `locator` JSON text or NULL.
EVIDENCE_FIELDS = ("role", "kinds", "source", "uri", "line", "ts", "text", "locator")


@dataclass(frozen=True)
class Output:
    kind: str  # sqlite | jsonl
    path: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.path}"


def parse_outputs(values: Sequence[str]) -> list[Output]:
    """The `--output KIND:PATH` values of a command; checked before any work is done."""
    outputs = []
    for value in values:
        kind, sep, path = value.partition(":")
        if not sep or kind not in WRITERS or not path.strip():
            raise BadInput("--output", "output", f"{value!r}: expected sqlite:PATH or jsonl:PATH")
        outputs.append(Output(kind, path))
    return outputs


def write_outputs(outputs: Sequence[Output], verdicts: Sequence[dict]) -> None:
    for output in outputs:
        try:
            Path(output.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            WRITERS[output.kind](str(Path(output.path).expanduser()), verdicts)
        except (OSError, sqlite3.Error) as e:  # unwritable path, a file that is not SQLite, a foreign table
            raise BadInput(f"--output {output}", "output", f"cannot write: {e}") from None


def write_sqlite(path: str, verdicts: Sequence[dict]) -> None:
    """Upsert by attempt_id: a re-run replaces an attempt's verdict row and its evidence rows, nothing else."""
    con = sqlite3.connect(path, timeout=30.0)  # another writer holds the file only for one short transaction
    try:
        with con:
            _ensure_schema(con)
            columns = ", ".join(VERDICT_KEYS)
            updates = ", ".join(f"{k} = excluded.{k}" for k in VERDICT_KEYS if k != "attempt_id")
            con.executemany(
                f"INSERT INTO verdicts ({columns}) VALUES ({', '.join('?' for _ in VERDICT_KEYS)}) "
                f"ON CONFLICT (attempt_id) DO UPDATE SET {updates}",
                [[_sqlite_value(v[k]) for k in VERDICT_KEYS] for v in verdicts],
            )
            con.executemany("DELETE FROM evidence WHERE attempt_id = ?", [[v["attempt_id"]] for v in verdicts])
            con.executemany(
                f"INSERT INTO evidence (attempt_id, position, {', '.join(EVIDENCE_FIELDS)}) "
                f"VALUES (?, ?, {', '.join('?' for _ in EVIDENCE_FIELDS)})",
                [[v["attempt_id"], position, *(_sqlite_value(item.get(k)) for k in EVIDENCE_FIELDS)]
                 for v in verdicts for position, item in enumerate(v["evidence"] or [], start=1)],
            )
    finally:
        con.close()


def _ensure_schema(con: sqlite3.Connection) -> None:
    """Create the tables, and add the columns of verdict fields newer than the file (fields are only ever added)."""
    column_defs = ", ".join(f"{k} {_sqlite_type(k)}" + (" PRIMARY KEY" if k == "attempt_id" else "") for k in VERDICT_KEYS)
    con.execute(f"CREATE TABLE IF NOT EXISTS verdicts ({column_defs})")
    present = {row[1] for row in con.execute("PRAGMA table_info(verdicts)")}
    for key in VERDICT_KEYS:
        if key not in present:
            con.execute(f"ALTER TABLE verdicts ADD COLUMN {key} {_sqlite_type(key)}")
    con.execute(
        "CREATE TABLE IF NOT EXISTS evidence (attempt_id TEXT NOT NULL, position INTEGER NOT NULL, role TEXT, kinds TEXT, "
        "source TEXT, uri TEXT, line INTEGER, ts TEXT, text TEXT, locator TEXT, PRIMARY KEY (attempt_id, position))"
    )
    if "kinds" not in {row[1] for row in con.execute("PRAGMA table_info(evidence)")}:  # a file from before kinds
        con.execute("ALTER TABLE evidence ADD COLUMN kinds TEXT")


def _sqlite_type(key: str) -> str:
    return "INTEGER" if key == "attempt" else "TEXT"


def _sqlite_value(value):
    """Lists and objects as JSON text (SQLite's json_extract reads them); scalars as they are."""
    return json.dumps(value, default=str) if isinstance(value, (list, dict)) else value


def append_jsonl(path: str, verdicts: Sequence[dict]) -> None:
    """One verdict object per line, appended: the stream keeps every attribution (the latest line of an attempt_id
    is its current verdict). A run's lines go out in one write to a file opened for appending (O_APPEND), so two
    runs appending at once do not mix their lines on a local file system."""
    if not verdicts:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(verdict_json(v) + "\n" for v in verdicts))


def verdict_json(verdict: dict) -> str:
    """One verdict on one line, as `attribute --json` prints several."""
    return json.dumps(verdict, default=str)


WRITERS = {"sqlite": write_sqlite, "jsonl": append_jsonl}


def render_text(verdicts: Sequence[dict], *, evidence_lines: int = 6) -> str:
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
    out = ["  ".join(str(x).ljust(w) for x, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows]  # no trailing blanks
    for v in verdicts:
        if v["verdict"] == "not_failed":
            continue
        out.append("")
        if v["verdict"] == "unattributed":
            out.append(f"{v['attempt_id']}: no cause found")
            out += quality_lines(v)
            continue
        cause = v["root_cause"]["summary"] if v["root_cause"] else "; ".join(
            f"{c['domain']}/{c['subdomain']} on {','.join(c['nodes']) or 'job'} ({c['score']:.2f})" for c in v["candidates"][:4]
        )
        out.append(f"{v['attempt_id']}: {cause}")
        if v.get("why_not"):
            out.append(why_not_line(v["why_not"]))
        out += quality_lines(v)
        if v["symptoms"]:
            nodes = sorted({s["node"] for s in v["symptoms"] if s["node"]})
            lines = symptom_lines(v)
            out.append(f"  symptoms: {len(v['symptoms'])} on {lines} line{'' if lines == 1 else 's'} ({', '.join(nodes) or '?'})")
        for e in v["evidence"][:evidence_lines]:
            where = f"{e['uri']}:{e['line']}" if e.get("line") is not None else e["uri"]
            out.append(f"  [{e['role']}] {where}")
            out.append(f"      {(e['text'] or '')[:200]}")
    return "\n".join(out)


def why_not_line(why_not: dict) -> str:
    """The verdict's strongest alternative and why it lost, for a person (`why_not`, docs/verdict.md)."""
    return f"  Not {why_not['domain']}/{why_not['subdomain']} on {why_not['node'] or 'the job'}: {why_not['detail']}"


def symptom_lines(verdict: dict) -> int:
    """How many log lines the symptoms were read from (two symptoms of one line count once)."""
    return len({(s["uri"], s["line"]) for s in verdict["symptoms"] if s.get("line") is not None})


def quality_lines(verdict: dict, *, max_inputs: int = 5) -> list[str]:
    """The text form of what `--json` says in `quality` and `connector_reports`: why the confidence is not high, and
    every input that was missing, empty or failed (which source, which path or glob, why)."""
    quality = verdict["quality"]
    lines = [] if quality["confidence"] == "high" else [f"  confidence {quality['confidence']}: " + "; ".join(quality["reasons"])]
    bad = [r for r in verdict.get("connector_reports") or [] if r["status"] != "ok"]
    lines += [f"  input {r['status']}: {r['source']} {r['uri']}" + (f": {r['reason']}" if r.get("reason") else "")
              for r in bad[:max_inputs]]
    if len(bad) > max_inputs:
        lines.append(f"  … {len(bad) - max_inputs} more inputs not ok (--json: connector_reports)")
    return lines


def format_rows(names: list[str], rows: list[tuple], fmt: str) -> str:
    """Query rows as `firstfault sql` prints them: an aligned table, CSV or one JSON object per line."""
    if fmt == "json":
        return "\n".join(json.dumps(dict(zip(names, r)), default=str) for r in rows)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(names)
        writer.writerows([[json.dumps(v, default=str) if isinstance(v, (list, dict)) else v for v in r] for r in rows])
        return buf.getvalue().rstrip("\n")
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [min(60, max([len(n)] + [len(c[i]) for c in cells])) for i, n in enumerate(names)]
    lines = [" | ".join(n.ljust(w) for n, w in zip(names, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(_fit(c, w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _fit(cell: str, width: int) -> str:
    """A cell padded to `width`; a longer one cut with an ellipsis, so a cut value never reads as the whole one."""
    return cell.ljust(width) if len(cell) <= width else cell[:width - 1] + "…"


def _cell(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=str)
    return str(v)
