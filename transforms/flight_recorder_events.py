"""PyTorch flight-recorder dumps as events the rules can point at: one `flight_recorder_dump` event per readable dump
(its PG membership in `fields.pgs`) and one `flight_recorder_entry` event for each of the last `KEEP_PER_PG` entries
per (rank, PG)."""
from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from datetime import datetime, timezone

import polars as pl

from firstfault.schema import FLIGHT_RECORDER_SOURCE as SOURCE

KEEP_PER_PG = 20


def _ts(ns) -> datetime | None:
    if not isinstance(ns, int) or ns <= 0:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None)


def flight_recorder_events(entries: pl.DataFrame, reports: list[dict], attempt_id: str, rank_map: Sequence[tuple[int, str, int]],
                           file_index_base: int = 0) -> pl.DataFrame:
    """Events for the rules: a `flight_recorder_dump` event per readable dump and the last KEEP_PER_PG
    `flight_recorder_entry` events per (rank, PG). Columns follow EVENT_SCHEMA (the caller conforms them)."""
    placed = {r: (node, lr) for r, node, lr in rank_map}
    index = {r["uri"]: file_index_base + i for i, r in enumerate(reports)}
    rows = []
    for r in reports:
        if "pgs" not in r:  # not readable: no dump event
            continue
        rank = r["rank"]
        node, local_rank = placed.get(rank, (None, None))
        created = [x for x in entries.filter(pl.col("uri") == r["uri"])["time_created_ns"].to_list() if x] if entries.height else []
        rows.append({
            "attempt_id": attempt_id, "event_id": f"{SOURCE}:{index[r['uri']]}:0:flight_recorder_dump",
            "kind": "flight_recorder_dump", "code": r["rows"], "code_text": "dump", "severity": "info",
            "node": node, "rank": rank, "local_rank": local_rank, "ts": _ts(max(created)) if created else None,
            "ts_quality": "exact" if created else "none",
            "message": f"flight recorder dump of rank {rank}: {r['rows']} entries, {len(r['pgs'])} process groups",
            "fields": json.dumps({"pgs": r["pgs"], "entries": r["rows"], "version": r["version"]}),
            "source": SOURCE, "uri": r["uri"], "line": 0, "locator": json.dumps({"dump": r["uri"]}),
            "raw": f"{posixpath.basename(r['uri'])}: {r['rows']} entries",
        })
    if entries.height:
        kept = (
            entries.with_columns(_n=pl.col("entry").rank("ordinal", descending=True).over("rank", "pg_name"))
            .filter(pl.col("_n") <= KEEP_PER_PG)
            .drop("_n")
        )
        for e in kept.iter_rows(named=True):
            node, local_rank = placed.get(e["rank"], (None, None))
            seq = e["p2p_seq_id"] if e["is_p2p"] else e["collective_seq_id"]
            rows.append({
                "attempt_id": attempt_id, "event_id": f"{SOURCE}:{index[e['uri']]}:{e['entry'] + 1}:flight_recorder_entry",
                "kind": "flight_recorder_entry", "code_text": e["state"], "severity": "info", "node": node, "rank": e["rank"],
                "local_rank": local_rank, "ts": _ts(e["time_created_ns"]), "ts_quality": "exact" if e["time_created_ns"] else "none",
                "pg": e["pg_name"], "seq": seq, "op_type": e["op"],
                "message": f"{e['op']} pg {e['pg_name']} ({e['pg_desc']}) seq {seq} {e['state']}",
                "fields": json.dumps({"pg_desc": e["pg_desc"], "is_p2p": e["is_p2p"], "collective_seq_id": e["collective_seq_id"],
                                      "p2p_seq_id": e["p2p_seq_id"], "input_sizes": e["input_sizes"],
                                      "output_sizes": e["output_sizes"]}),
                "source": SOURCE, "uri": e["uri"], "line": e["entry"] + 1, "locator": e["locator"],
                "raw": f"{posixpath.basename(e['uri'])}[{e['entry']}]: {e['op']} pg {e['pg_name']} seq {seq} {e['state']}",
            })
    schema = {"attempt_id": pl.String, "event_id": pl.String, "kind": pl.String, "code": pl.Int64, "code_text": pl.String,
              "severity": pl.String, "node": pl.String, "rank": pl.Int32, "local_rank": pl.Int32, "ts": pl.Datetime("us"),
              "ts_quality": pl.String, "pg": pl.String, "seq": pl.Int64, "op_type": pl.String, "message": pl.String,
              "fields": pl.String, "source": pl.String, "uri": pl.String, "line": pl.Int64, "locator": pl.String, "raw": pl.String}
    return pl.DataFrame([{k: row.get(k) for k in schema} for row in rows], schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
