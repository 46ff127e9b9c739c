"""Score verdicts against what was expected of them (`firstfault evaluate`): one scorer for the simulated fleet
(truth.jsonl, synthetic/simulate.py) and the real-line corpus (fixture cases, rules_sql/corpus.py).

An expectation holds the keys it scores (`verdict`, `domain`, `subdomain`, `culprit_nodes`; a key left out is not
scored) and `no_hits`, causes the attempt must not be given. Confident wrong: an `attributed` verdict on an attempt
expected otherwise, or attributed to another domain, subdomain or culprit than expected, or given a forbidden cause.
"""
from __future__ import annotations

SCORED = ("verdict", "domain", "subdomain", "culprit_nodes")
SHOWN = 40  # attempts listed per list in the rendered scorecard
CONFIDENCE = ("high", "medium", "low")


def score(attempts: list[tuple[str, dict, dict | None, list[dict]]]) -> dict:
    """(attempt id, expectation, verdict row or None when missing, rule hits) per attempt -> the scorecard."""
    missing, rows = 0, []
    for attempt_id, want, got, hits in attempts:
        if got is None:
            missing += 1
        else:
            confidence = got.get("confidence") or (got.get("quality") or {}).get("confidence")
            rows.append(_score_one(attempt_id, want, {**got, "culprit_nodes": sorted(got.get("culprit_nodes") or []), "confidence": confidence}, hits))
    attributable = [r for r in rows if r["expected"].get("verdict") == "attributed"]
    ratio = lambda rs, key: round(sum(key not in r["wrong"] for r in rs) / len(rs), 4) if rs else None  # noqa: E731
    confusion: dict[str, dict[str, int]] = {}
    for r in rows:
        cell = confusion.setdefault(r["expected_label"], {})
        cell[r["got_label"]] = cell.get(r["got_label"], 0) + 1
    correct = sum(r["correct"] for r in rows)
    return {
        "attempts": len(attempts), "scored": len(rows), "missing": missing, "attributable_failures": len(attributable),
        "correct": correct, "accuracy": round(correct / len(rows), 4) if rows else None,
        "verdict_accuracy": ratio([r for r in rows if "verdict" in r["expected"]], "verdict"),
        **{f"{key.removesuffix('_nodes')}_accuracy": ratio([r for r in attributable if key in r["expected"]], key)
           for key in ("domain", "subdomain", "culprit_nodes")},
        "confident_wrong": sum(r["confident_wrong"] for r in rows),
        "confident_wrong_attempts": [_brief(r) for r in rows if r["confident_wrong"]],
        "misses": [_brief(r) for r in rows if not r["correct"] and not r["confident_wrong"]],
        "confusion": confusion,
        "by_confidence": by_confidence(rows),
    }


def by_confidence(rows: list[dict]) -> dict[str, dict]:
    """Per confidence level: how many verdicts were given at it and how many of them were right in every scored field."""
    out = {}
    for level in CONFIDENCE:
        at = [r for r in rows if r["confidence"] == level]
        right = sum(r["correct"] for r in at)
        out[level] = {"verdicts": len(at), "right": right, "share": round(right / len(at), 4) if at else None}
    return out


def _score_one(attempt_id: str, want: dict, got: dict, hits: list[dict]) -> dict:
    wrong = [k for k in SCORED if k in want and got.get(k) != (sorted(want[k]) if k == "culprit_nodes" else want[k])]
    unwanted = [u for u in want.get("no_hits") or [] if any(all(h.get(k) == v for k, v in u.items()) for h in hits)]
    attributed = got["verdict"] == "attributed"
    expected_verdict = want.get("verdict")
    return {
        "attempt_id": attempt_id, "expected": want, "got": {k: got.get(k) for k in SCORED}, "wrong": wrong, "unwanted": unwanted,
        "confidence": got["confidence"],
        "correct": not wrong and not unwanted,
        "confident_wrong": attributed and (bool(unwanted) or (expected_verdict not in (None, "attributed"))
                                           or (expected_verdict == "attributed" and bool(wrong))),
        # rows: the expected domain, or the expected verdict in parentheses ("(any)": only some causes are forbidden)
        "expected_label": str(want.get("domain")) if expected_verdict == "attributed" else f"({expected_verdict or 'any'})",
        "got_label": str(got["domain"]) if attributed else f"({got['verdict']})",
    }


def _brief(row: dict) -> dict:
    return {"attempt_id": row["attempt_id"], "expected": {k: v for k, v in row["expected"].items() if k in (*SCORED, "kind", "no_hits")},
            "got": row["got"], "wrong": row["wrong"], "unwanted": row["unwanted"]}


def render(result: dict, title: str) -> str:
    """The scorecard as text: the measures, the confusion matrix, then the confident-wrong and missed attempts."""
    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    out = [f"{title}: {result['attempts']} attempts (scored {result['scored']}, missing {result['missing']}), "
           f"attributable failures {result['attributable_failures']}",
           f"correct             {result['correct']}/{result['scored']} ({pct(result['accuracy'])})",
           f"verdict accuracy    {pct(result['verdict_accuracy'])}",
           f"domain accuracy     {pct(result['domain_accuracy'])}",
           f"culprit accuracy    {pct(result['culprit_accuracy'])}",
           f"subdomain accuracy  {pct(result['subdomain_accuracy'])}",
           f"confident wrong     {result['confident_wrong']}", "",
           "right per confidence level: " + ", ".join(
               f"{level} {c['right']}/{c['verdicts']}" + (f" ({pct(c['share'])})" if c["verdicts"] else "")
               for level, c in result["by_confidence"].items()), "",
           "confusion (rows: expected domain or (verdict), columns: got)"]
    cols = sorted({c for row in result["confusion"].values() for c in row})
    width = max([len(c) for c in [*cols, *result["confusion"]]] + [14])
    out.append("".ljust(width) + "  " + "  ".join(c.rjust(width) for c in cols))
    for exp in sorted(result["confusion"]):
        out.append(exp.ljust(width) + "  " + "  ".join(str(result["confusion"][exp].get(c, 0) or ".").rjust(width) for c in cols))
    for heading, key in (("confident wrong", "confident_wrong_attempts"), ("misses", "misses")):
        if result[key]:
            out += ["", f"{heading}:"]
            out += [f"  {m['attempt_id']}: expected {_fields(m['expected'])} got {_fields(m['got'])}"
                    + (f" forbidden {m['unwanted']}" if m["unwanted"] else "") for m in result[key][:SHOWN]]
    return "\n".join(out)


def _fields(d: dict) -> str:
    return " ".join(f"{k}={d[k]}" for k in SCORED if k in d)
