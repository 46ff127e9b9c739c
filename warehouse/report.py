"""`firstfault report`: a self-contained offline HTML view of a warehouse, and Prefect artifacts.

No server, no CDN, no JavaScript framework: inline CSS, inline SVG charts drawn here. Every text that comes from a
log or from the warehouse goes through `esc` (html.escape) — logs are untrusted. The warehouse is opened read-only.
Fleet sections (node_offenders, port_hotspots, gpu_model_trends, incidents) are rendered only when their table exists;
their columns are read from the table itself, so the view follows whatever the fleet flow writes.
"""
from __future__ import annotations

import html
import json
import math
import os
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from firstfault.warehouse.read import (
    attempt_evidence,
    context_events,
    existing_tables,
    progress_points,
    query,
    report_attempts,
    table_columns,
)
from firstfault.warehouse.store import connect_reader

from firstfault.ids import attempt_key

FAILED = ("attributed", "ambiguous", "unattributed")
ROLE_COLOURS = {
    "root_cause": "#c62828", "corroboration": "#1565c0", "confirmation": "#2e7d32", "symptom": "#ef6c00",
    "context": "#9e9e9e",
}
VERDICT_COLOURS = {"attributed": "#c62828", "ambiguous": "#8e24aa", "unattributed": "#6d4c41", "not_failed": "#2e7d32"}
MAX_ROWS = 200

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#263238;color:#fff;padding:12px 24px}header a{color:#b3e5fc}
header h1{margin:0;font-size:20px}header .sub{color:#cfd8dc;font-size:12px}
main{padding:8px 16px 40px}
h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;background:#fff;margin:6px 0;font-size:12px}
th,td{border:1px solid #e0e0e0;padding:3px 6px;text-align:left;vertical-align:top}
.word{white-space:nowrap}
.scroll{overflow-x:auto}details:not([open]) .scroll{display:none}
.under{color:#555;font-size:12px}
code.path{overflow-wrap:anywhere}
th{background:#eceff1}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.pill{white-space:nowrap;display:inline-block;border-radius:9px;padding:0 8px;color:#fff;font-size:12px}
.note{background:#fff8e1;border:1px solid #ffe082;padding:6px 10px;display:inline-block;border-radius:4px}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px;align-items:start}
.charts svg{width:100%}.card{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:8px 14px}
.card b{font-size:22px;display:block}
.kv td:first-child{font-weight:600;background:#f5f5f5;white-space:nowrap}
pre.raw{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
.role{font-weight:600}
svg{background:#fff;border:1px solid #e0e0e0;display:block;margin:6px 0;max-width:100%;height:auto}
td.nowrap{white-space:nowrap}
svg text{font:11px system-ui,sans-serif;fill:#333}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
"""


def esc(value) -> str:
    """Any value as escaped HTML text (lists joined, None as a dash)."""
    return html.escape(shown(value), quote=True)


def shown(value) -> str:
    """Any value as the text a page shows (lists joined, None as a dash, times in UTC), not yet escaped."""
    if value is None:
        return "–"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else "–"
    if isinstance(value, dict):
        return json.dumps(value, default=str)
    if isinstance(value, datetime):
        return fmt_ts(value)
    if isinstance(value, (float, Decimal)):
        return f"{float(value):.3g}"
    return str(value)


def fmt_ts(ts) -> str:
    """UTC timestamp text; naive warehouse timestamps are UTC already."""
    if ts is None:
        return "–"
    if isinstance(ts, datetime):
        if ts.tzinfo is not None:
            ts = ts.astimezone(timezone.utc).replace(tzinfo=None)
        text = ts.strftime("%Y-%m-%d %H:%M:%S")
        if ts.microsecond:
            text += f".{ts.microsecond // 1000:03d}"
        return text + " UTC"
    return str(ts)


def parse_ts(value):
    """An ISO timestamp of the verdict JSON ('…Z') as a datetime, so every time on a page reads the same (fmt_ts)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value


def page(title: str, body: str, *, up: str = "") -> str:
    nav = f'<a href="{up}index.html">fleet summary</a> · ' if up else ""
    generated = fmt_ts(datetime.now(timezone.utc).replace(microsecond=0))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width\"><title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><header><h1>{esc(title)}</h1><div class=\"sub\">{nav}firstfault report · generated {generated} · "
        f"all times UTC</div></header><main>{body}</main></body></html>\n"
    )


def pill(verdict) -> str:
    colour = VERDICT_COLOURS.get(verdict or "", "#607d8b")
    return f'<span class="pill" style="background:{colour}">{esc(verdict)}</span>'


def table(headers: list[str], rows: list[list[str]], *, num: set[int] = frozenset(), nowrap: set[int] = frozenset(),
          row_attrs: list[str] | None = None, table_id: str = "") -> str:
    """rows are already-escaped HTML cells (`clipped` for values that may hold long words: cells wrap between words
    only). `row_attrs`: escaped attributes of each <tr> (what the CSS filters match)."""
    def cell(i: int, c: str) -> str:
        classes = " ".join(k for k, on in (("num", i in num), ("nowrap", i in nowrap)) if on)
        return f'<td class="{classes}">{c}</td>' if classes else f"<td>{c}</td>"

    head = "".join(f"<th>{unbroken_words(esc(h))}</th>" for h in headers)
    attrs = row_attrs or [""] * len(rows)
    body = "".join(f"<tr{a}>" + "".join(cell(i, unbroken_words(c)) for i, c in enumerate(r)) + "</tr>" for r, a in zip(rows, attrs))
    opening = "<table" + (f' id="{table_id}"' if table_id else "") + ">"
    return f"{opening}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# A longer word in a table cell (a path, an exception's class name) is cut with an ellipsis, whole in its tooltip:
# cells never break a word, and no word widens a table past the window.
_LONG_WORD = 28


def clipped(value) -> str:
    """esc(value), each word longer than _LONG_WORD characters cut to that length with an ellipsis, whole on hover."""
    def cut(m: re.Match) -> str:
        return f'<span title="{esc(m[0])}">{esc(m[0][:_LONG_WORD - 1])}…</span>'
    return "".join(cut(m) if len(m[0]) > _LONG_WORD and not m[0].isspace() else esc(m[0])
                   for m in re.finditer(r"\s+|\S+", shown(value)))


def unbroken_words(cell: str) -> str:
    """A cell's words with a hyphen or a slash (node-02, 2026-11-29, kernel/node-02.log:3) kept on one line: browsers
    break lines after those characters, and a value cut in two reads as two. The raw log text wraps as it must."""
    if '<pre class="raw">' in cell:
        return cell
    return "".join(part if part.startswith("<") else re.sub(r"\S*[-/]\S*", lambda m: f'<span class="word">{m[0]}</span>', part)
                   for part in re.split(r"(<[^>]*>)", cell))


def not_computed(name: str) -> str:
    return (f'<p class="note">not computed yet: the warehouse has no <code>{esc(name)}</code> table '
            "(the nightly fleet aggregation writes it).</p>")


# ---------------------------------------------------------------------------------------------- SVG charts

def chart_title(x: float, text: str) -> str:
    return f'<text class="chart-title" x="{x}" y="15" font-weight="600">{esc(text)}</text>'


def axis_label(axis: str, x: float, y: float, text: str, *, rotate: bool = False) -> str:
    """The name of an axis, written on the chart (the DOM test reads it by its class)."""
    where = f'transform="translate({x:.0f},{y:.0f}) rotate(-90)"' if rotate else f'x="{x:.0f}" y="{y:.0f}"'
    return f'<text class="axis-label {axis}" {where} text-anchor="middle" font-style="italic">{esc(text)}</text>'


def svg_bars(items: list[tuple[str, float]], *, title: str, category: str, unit: str, colours: dict | None = None,
             width: int = 360) -> str:
    """Horizontal bar chart: one bar per (label, value); `category` names the bars' axis, `unit` the values'."""
    if not items:
        return "<p>–</p>"
    left, bar_h, gap, head = 150, 18, 6, 40
    top = max(v for _, v in items) or 1
    height = head + len(items) * (bar_h + gap) + 26
    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
             chart_title(4, title), axis_label("y", left / 2, head - 6, category),
             axis_label("x", left + (width - left - 50) / 2, height - 6, unit)]
    for i, (label, value) in enumerate(items):
        y = head + 5 + i * (bar_h + gap)
        w = max(1.0, (width - left - 50) * value / top)
        colour = (colours or {}).get(label, "#546e7a")
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{esc(label)}</text>'
                     f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"><title>{esc(label)}: '
                     f'{esc(value)}</title></rect><text x="{left + w + 5:.1f}" y="{y + 13}">{esc(value)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _heat_colour(fraction: float) -> str:
    f = max(0.0, min(1.0, fraction))
    r, g, b = 255, int(245 - 190 * f), int(235 - 200 * f)
    return f"rgb({r},{g},{b})"


def svg_heatmap(cells: dict[tuple[str, str], float], row_label: str, col_label: str, *, title: str) -> str:
    """Grid of rows × columns coloured by value (white → red), the value written in each cell."""
    rows = sorted({r for r, _ in cells}, key=lambda r: (-sum(v for (rr, _), v in cells.items() if rr == r), r))[:40]
    cols = sorted({c for _, c in cells}, key=lambda c: (-sum(v for (_, cc), v in cells.items() if cc == c), c))[:40]
    top_value = max(cells.values()) or 1
    cw, ch, left, head = 56, 22, 150, 100
    width, height = max(left + cw * len(cols) + 10, 360), head + ch * len(rows) + 10
    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
             chart_title(4, title), axis_label("y", left / 2, 36, f"{row_label} ↓"),
             axis_label("x", left + cw * len(cols) / 2, 36, f"{col_label} →")]
    for j, col in enumerate(cols):
        x = left + j * cw + cw / 2
        parts.append(f'<text transform="translate({x:.0f},{head - 6}) rotate(-40)">{esc(col)}</text>')
    for i, row in enumerate(rows):
        y = head + i * ch
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{esc(row)}</text>')
        for j, col in enumerate(cols):
            value = cells.get((row, col))
            fill = "#f5f5f5" if value is None else _heat_colour(value / top_value)
            tip = f"{row} × {col}: {'–' if value is None else value}"
            parts.append(f'<rect x="{left + j * cw}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{fill}">'
                         f"<title>{esc(tip)}</title></rect>")
            if value is not None:
                parts.append(f'<text x="{left + j * cw + cw / 2 - 1:.0f}" y="{y + 15}" text-anchor="middle">{esc(value)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high`: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / (count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [round(step * k, 10) for k in range(math.ceil(high / step - 1e-9) + 1)]


def tick_text(value: float) -> str:
    return f"{value:g}"


def svg_trend(points: list[tuple[str, float, float | None, float | None]], *, title: str, x_label: str, y_label: str) -> str:
    """Line chart over ordered x labels (weeks) with round y ticks from 0; the interval [lo, hi] as a shaded band and
    whiskers. A single point is drawn as a point with its interval, never as a line."""
    width, height, left, right, top, bottom = 560, 236, 64, 44, 28, 56
    values = [v for _, v, lo, hi in points for v in (v, lo, hi) if v is not None]
    ticks = nice_ticks(max(values + [0.0]))
    y_max = ticks[-1]
    n = len(points)

    def x(i):
        return left + (width - left - right) * (0.5 if n == 1 else i / (n - 1))

    def y(v):
        return top + (height - top - bottom) * (1 - v / y_max)

    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
             chart_title(left, title), axis_label("y", 12, (height - bottom + top) / 2, y_label, rotate=True),
             axis_label("x", (left + width - right) / 2, height - 6, x_label)]
    for v in ticks:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                     f'<text class="tick" x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{tick_text(v)}</text>')
    band = [(x(i), lo, hi) for i, (_, _, lo, hi) in enumerate(points) if lo is not None and hi is not None]
    if len(band) > 1:
        poly = [f"{bx:.1f},{y(hi):.1f}" for bx, _, hi in band] + [f"{bx:.1f},{y(lo):.1f}" for bx, lo, _ in reversed(band)]
        parts.append(f'<polygon points="{" ".join(poly)}" fill="#90caf9" fill-opacity="0.35"/>')
    for bx, lo, hi in band:
        parts.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="#1565c0"/>')
    if n > 1:
        line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, (_, v, _, _) in enumerate(points))
        parts.append(f'<polyline class="trend" points="{line}" fill="none" stroke="#1565c0" stroke-width="2"/>')
    else:
        parts.append(f'<text x="{x(0) + 10:.1f}" y="{top + 14}">one {esc(x_label)} only: no trend yet</text>')
    for i, (label, v, lo, hi) in enumerate(points):
        tip = f"{label}: {v:.3g}" + (f" [{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None else "")
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3.5" fill="#1565c0"><title>{esc(tip)}</title></circle>'
                     f'<text x="{x(i):.1f}" y="{height - bottom + 16}" text-anchor="middle">{esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


TIME_STEPS_S = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def time_ticks(start: float, end: float, most: int = 8) -> list[float]:
    """Round instants (epoch seconds) within [start, end]: multiples of the smallest step of TIME_STEPS_S that gives
    at most `most` ticks."""
    step = next((s for s in TIME_STEPS_S if (end - start) / s <= most), TIME_STEPS_S[-1])
    first = math.ceil(start / step - 1e-9) * step
    return [round(first + k * step, 3) for k in range(int((end - first) / step + 1e-9) + 1)]


def svg_timeline(marks: list[dict], lanes: list[str], root_ts: datetime | None, window: tuple | None = None, *,
                 title: str = "Evidence across nodes over time") -> str:
    """One lane per node, x = time (UTC); marks carry node, ts, role, label; the root cause as a red diamond. With a
    `window` (start, end) the x axis spans exactly that window, so its label tells what is shown."""
    timed = [m for m in marks if m["ts"] is not None and (window is None or window[0] <= m["ts"] <= window[1])]
    width, left, right, top, lane_h = 1160, 130, 20, 54, 30
    height = top + lane_h * len(lanes) + 30
    parts = [f'<svg class="timeline chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
             chart_title(4, title), axis_label("y", left / 2, top - 10, "node"),
             axis_label("x", width - right - 40, 15, "time (UTC)")]  # top right: the ticks fill the top row
    if not timed:
        parts.append('<text x="10" y="20">no timestamped evidence</text></svg>')
        return "".join(parts)
    if window:
        t0, t1 = window
        t0_pad, full = t0.timestamp(), (t1 - t0).total_seconds()
    else:
        t0, t1 = min(m["ts"] for m in timed), max(m["ts"] for m in timed)
        span = (t1 - t0).total_seconds() or 60.0
        t0_pad = t0.timestamp() - span * 0.03
        full = span * 1.06

    def x(ts):
        return left + (width - left - right) * (ts.timestamp() - t0_pad) / full

    for t in time_ticks(t0_pad, t0_pad + full):
        tx = left + (width - left - right) * (t - t0_pad) / full
        label = datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3 if full < 6 else -7]
        parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{top - 6}" y2="{height - 24}" stroke="#eee"/>'
                     f'<text class="time-tick" x="{tx:.1f}" y="{top - 10}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{left}" y="{height - 6}">{esc(fmt_ts(t0))} → {esc(fmt_ts(t1))}</text>')
    lane_y = {lane: top + i * lane_h + lane_h / 2 for i, lane in enumerate(lanes)}
    for lane, ly in lane_y.items():
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{ly:.1f}" y2="{ly:.1f}" stroke="#cfd8dc"/>'
                     f'<text x="{left - 8}" y="{ly + 4:.1f}" text-anchor="end" font-weight="600">{esc(lane)}</text>')
    if root_ts is not None:
        rx = x(root_ts)
        parts.append(f'<line class="root-line" x1="{rx:.1f}" x2="{rx:.1f}" y1="{top - 4}" y2="{height - 24}" '
                     f'stroke="#c62828" stroke-dasharray="4,3"/>')
    order = {"context": 0, "symptom": 1, "confirmation": 2, "corroboration": 3, "root_cause": 4}
    for m in sorted(timed, key=lambda m: order.get(m["role"], 0)):
        mx, my = x(m["ts"]), lane_y[m["lane"]]
        colour = ROLE_COLOURS.get(m["role"], "#9e9e9e")
        tip = f"{m['role']} · {m['label']} · {fmt_ts(m['ts'])}"
        if m["role"] == "root_cause":
            shape = (f'<polygon class="root-cause" points="{mx:.1f},{my - 10:.1f} {mx + 9:.1f},{my:.1f} {mx:.1f},{my + 10:.1f} '
                     f'{mx - 9:.1f},{my:.1f}" fill="{colour}" stroke="#000" stroke-width="1.2">')
            end = "</polygon>"
        elif m["role"] in ("corroboration", "confirmation"):
            shape = f'<rect x="{mx - 5:.1f}" y="{my - 5:.1f}" width="10" height="10" fill="{colour}">'
            end = "</rect>"
        else:
            r = 3 if m["role"] == "context" else 5
            shape = f'<circle cx="{mx:.1f}" cy="{my:.1f}" r="{r}" fill="{colour}" fill-opacity="0.8">'
            end = "</circle>"
        parts.append(f"{shape}<title>{esc(tip)}</title>{end}")
    parts.append("</svg>")
    return "".join(parts)


def timeline_legend() -> str:
    names = {"root_cause": "root cause ◆", "corroboration": "corroboration ■", "confirmation": "confirmation ■",
             "symptom": "symptom / cascade ●", "context": "other rule-tagged events"}
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{ROLE_COLOURS[k]}"></i>{esc(v)}</span>' for k, v in names.items()) + "</div>"


# ---------------------------------------------------------------------------------------------- index page

def attempt_href(attempt_id: str) -> str:
    """attempts/<cluster>/<workload_id>/<attempt>.html: a name a person reads. Each part is made path-safe by
    attempt_key, and a part of only dots is escaped too, so no id leads out of the report folder."""
    parts = [attempt_key(p) if p.strip(".") else p.replace(".", "~2E") for p in attempt_id.split("/")]
    return "attempts/" + "/".join(parts) + ".html"


def most_common(counts: Counter, n: int | None = None) -> list[tuple[str, int]]:
    """The biggest counts first, equal counts by name: the same chart whatever order the rows came in."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def summary_section(attempts: list[dict]) -> str:
    verdicts = Counter(a["verdict"] for a in attempts)
    failed = [a for a in attempts if a["verdict"] in FAILED]
    domains = Counter(f"{a['domain']}/{a['subdomain'] or '–'}" if a["domain"] else a["verdict"] for a in failed)
    culprits = Counter(n for a in failed for n in (a["culprit_nodes"] or []))
    cards = "".join(f'<div class="card"><b>{n}</b>{esc(label)}</div>' for label, n in (
        ("attempts", len(attempts)), ("failed", len(failed)),
        ("attributed", verdicts.get("attributed", 0)), ("ambiguous", verdicts.get("ambiguous", 0)),
        ("unattributed", verdicts.get("unattributed", 0))))
    return (
        f'<h2 id="summary">Fleet summary</h2><div class="cards">{cards}</div>'
        '<div class="charts"><div>'
        + svg_bars(most_common(verdicts), title="Attempts by verdict", category="verdict",
                   unit="attempts", colours=VERDICT_COLOURS)
        + "</div><div>" + svg_bars(most_common(domains, 12), title="Failed attempts by cause", category="domain/subdomain",
                                   unit="attempts")
        + "</div><div>"
        + (svg_bars(most_common(culprits, 10), title="Top culprit nodes", category="node", unit="failed attempts blamed on it")
           if culprits else "<h3>Top culprit nodes</h3><p>no culprit nodes named.</p>")
        + "</div></div>"
    )


def attempts_section(attempts: list[dict]) -> str:
    rows = []
    newest_first = sorted(attempts, key=lambda a: (a.get("start_ts") is not None, a.get("start_ts") or datetime.min,
                                                  a["attempt_id"]), reverse=True)
    for a in newest_first:
        link = (f'<a href="{esc(attempt_href(a["attempt_id"]))}">{clipped(a["attempt_id"])}</a>'
                if a["verdict"] in FAILED else clipped(a["attempt_id"]))
        cause = f'<div class="under">{clipped(a["root_cause"]["summary"])}</div>' if a.get("root_cause") else ""
        confidence = (a["quality"] or {}).get("confidence")
        # the cause under the attempt, state and confidence under the verdict: the table fits 1024 px
        rows.append([link + cause, pill(a["verdict"]) + f'<div class="under">{esc(a["state"])} · {esc(confidence)} confidence</div>',
                     esc(f"{a['domain'] or '–'} / {a['subdomain'] or '–'}"), clipped(a["culprit_nodes"]), esc(a["action"]),
                     esc(fmt_ts(a.get("start_ts"))), esc(a.get("gpu_model"))])
    headers = ["attempt and cause", "verdict", "domain / subdomain", "culprits", "action", "start", "GPU"]
    attrs = [f' data-verdict="{filter_value(a["verdict"])}" data-domain="{filter_value(a["domain"])}"' for a in newest_first]
    return (f'<h2 id="attempts">Attempts ({len(attempts)}, newest first)</h2>' + attempt_filters(attempts)
            + table(headers, rows, nowrap={4, 6}, row_attrs=attrs, table_id="attempts-table"))


def filter_value(value) -> str:
    """A verdict or domain as an id- and attribute-safe word ('none' for a missing domain)."""
    return re.sub(r"[^a-z0-9_-]", "-", str(value or "none").lower())


def attempt_filters(attempts: list[dict]) -> str:
    """Filters by verdict and by domain without a script: one radio button per value, and a CSS rule (:has) per value
    that hides the table's other rows."""
    groups, rules = [], []
    for key in ("verdict", "domain"):
        values = sorted({filter_value(a[key]) for a in attempts})
        buttons = [f'<label><input type="radio" name="{key}" id="{key}-all" checked> all</label>']
        for value in values:
            buttons.append(f'<label><input type="radio" name="{key}" id="{key}-{value}"> {esc(value)}</label>')
            rules.append(f'body:has(#{key}-{value}:checked) #attempts-table tbody tr:not([data-{key}="{value}"]){{display:none}}')
        groups.append(f"<span>{key}: " + " ".join(buttons) + "</span>")
    return f'<style>{"".join(rules)}</style><p class="filters">show ' + " · ".join(groups) + "</p>"


def generic_table(con, name: str, columns: list[tuple[str, str]]) -> str:
    """Every column of a fleet table; rows that count no failure are left out (a trend table lists every week of
    every model, most of them zero)."""
    numeric = [c for c, t in columns if _is_numeric(t)]
    where = ' WHERE "failures" > 0' if "failures" in numeric else ""
    if "position" in {c for c, _ in columns}:
        order = ' ORDER BY "position"'
    else:
        order = f' ORDER BY "{numeric[0]}" DESC NULLS LAST' if numeric else ""
    total = con.execute(f'SELECT count(*) FROM "{name}"{where}').fetchone()[0]
    rows = query(con, f'SELECT * FROM "{name}"{where}{order} LIMIT {MAX_ROWS}')
    names = [c for c, _ in columns]
    num = {i for i, (_, t) in enumerate(columns) if _is_numeric(t)}
    # column names read as words (first seen), so a header wraps between them instead of widening its column
    body = table([c.replace("_", " ") for c in names], [[clipped(r[c]) for c in names] for r in rows], num=num)
    shown = (f"<p>{total} rows" + (" with failures" if where else "")
             + (f", showing the first {MAX_ROWS}" if total > MAX_ROWS else "") + ".</p>")
    return shown + body


def _is_numeric(data_type: str) -> bool:
    t = data_type.upper()
    return any(k in t for k in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC")) and "[]" not in t


def _pick(columns: list[tuple[str, str]], candidates: tuple[str, ...], *, numeric: bool | None = None,
          exclude: tuple[str, ...] = ()) -> str | None:
    names = {c.lower(): (c, t) for c, t in columns if c not in exclude}
    for cand in candidates:
        if cand in names and (numeric is None or _is_numeric(names[cand][1]) == numeric):
            return names[cand][0]
    return None


def hotspot_cells(con) -> tuple[dict, str, str] | None:
    """port_hotspots as written by warehouse/fleet.sql (level, key, attempts): switch × port when a topology gave
    switch ports, else host × peer from the links, else host × NIC."""
    rows = query(con, "SELECT level, key, attempts FROM port_hotspots WHERE key IS NOT NULL")
    by_level: dict[str, dict] = {}
    for r in rows:
        level, key, n = r["level"], str(r["key"]), float(r["attempts"] or 0)
        cells = by_level.setdefault(level, {})
        if level == "switch_port" and "/" in key:
            cells[tuple(key.rsplit("/", 1))] = n
        elif level == "link" and " <-> " in key:
            a, b = key.split(" <-> ", 1)
            cells[(a, b)] = cells[(b, a)] = n
        elif level == "nic":
            host, _, nic = key.partition("/")
            cells[(host, nic or "(all NICs)")] = n
    for level, row_label, col_label in (("switch_port", "switch", "port"), ("link", "host", "peer"), ("nic", "host", "NIC")):
        if by_level.get(level):
            return by_level[level], row_label, col_label
    return None


def heatmap_section(con, columns: list[tuple[str, str]]) -> str:
    names = {c for c, _ in columns}
    if {"level", "key", "attempts"} <= names:
        found = hotspot_cells(con)
        if not found:
            return "<p>no port hot spots.</p>"
        cells, row_label, col_label = found
        return svg_heatmap(cells, row_label, col_label, title=f"Attempts implicated, by {row_label} and {col_label}")
    row_col = _pick(columns, ("switch", "switch_port", "host", "node", "reporter_node", "device", "hca"), numeric=False)
    col_col = _pick(columns, ("port", "peer", "peer_node", "link", "peer_host", "hca_port", "device"),
                    exclude=(row_col,) if row_col else ())
    value_col = _pick(columns, ("score", "hotspot_score", "failures", "attempts", "events", "errors", "flaps",
                                "incidents", "count", "n", "hits"), numeric=True)
    if value_col is None:
        value_col = next((c for c, t in columns if _is_numeric(t) and c not in (row_col, col_col)), None)
    if not (row_col and col_col and value_col):
        return "<p>(no heat-map columns recognised; the table is listed below)</p>"
    rows = query(con, f'SELECT CAST("{row_col}" AS VARCHAR) AS r, CAST("{col_col}" AS VARCHAR) AS c, '
                      f'sum("{value_col}") AS v FROM port_hotspots GROUP BY 1, 2')
    cells = {(r["r"] or "–", r["c"] or "–"): round(float(r["v"] or 0), 3) for r in rows}
    if not cells:
        return "<p>no port hot spots.</p>"
    return svg_heatmap(cells, row_col, col_col, title=f"{value_col} by {row_col} and {col_col}")


def trends_section(con, columns: list[tuple[str, str]]) -> str:
    model = _pick(columns, ("gpu_model", "model"))
    week = _pick(columns, ("iso_week", "week", "week_start", "period", "day", "date"))
    value = _pick(columns, ("rate_per_1k_gpu_hours", "rate", "failure_rate", "fail_rate", "value", "per_1k_gpu_hours", "rate_per_gpu_day",
                            "failures", "attempts", "count"), numeric=True)
    lo = _pick(columns, ("rate_lower", "lo", "low", "lower", "ci_low", "ci_lo", "rate_lo", "rate_low", "lower_bound"), numeric=True)
    hi = _pick(columns, ("rate_upper", "hi", "high", "upper", "ci_high", "ci_hi", "rate_hi", "rate_high", "upper_bound"), numeric=True)
    if not (model and week and value):
        return "<p>(no trend columns recognised; the table is listed below)</p>"
    extra = f', "{lo}" AS lo, "{hi}" AS hi' if lo and hi else ", NULL AS lo, NULL AS hi"
    where, scope = "", ""
    if "domain" in {c for c, _ in columns}:  # one row per domain: chart every failure (domain 'all') when present
        if con.execute("SELECT count(*) FROM gpu_model_trends WHERE domain = 'all'").fetchone()[0]:
            where, scope = " WHERE domain = 'all'", ", all domains"
    rows = query(con, f'SELECT CAST("{model}" AS VARCHAR) AS m, CAST("{week}" AS VARCHAR) AS w, "{value}" AS v{extra} '
                      f'FROM gpu_model_trends{where} ORDER BY 1, 2')
    charts = []
    for m in sorted({r["m"] for r in rows}, key=lambda s: s or ""):
        pts = [(r["w"], float(r["v"]), _float(r["lo"]), _float(r["hi"])) for r in rows if r["m"] == m and r["v"] is not None]
        if not any(v for _, v, _, _ in pts) or m in (None, "unknown"):  # a flat line of zeros or an unnamed model says nothing
            continue
        band = ", shaded: its interval" if lo and hi else ""
        charts.append(svg_trend(pts, title=f"{m}: {human(value)}{scope}{band}", x_label=human(week), y_label=human(value)))
    return '<div class="cards">' + "".join(charts) + "</div>" if charts else "<p>no failures to chart yet.</p>"


# column names as a reader says them
HUMAN_NAMES = {"rate_per_1k_gpu_hours": "failures per 1,000 GPU-hours", "iso_week": "ISO week", "week": "week",
               "failures": "failures", "attempts": "attempts", "rate": "failure rate"}


def human(column: str) -> str:
    return HUMAN_NAMES.get(column, column.replace("_", " "))


def _float(v):
    return None if v is None else float(v)


# node_offenders as an on-call engineer reads it: what to do about which node and why (every column stays one
# click away, under "all columns")
OFFENDER_COLUMNS = {"position": "#", "node": "node", "gpu": "GPU", "recommendation": "recommendation",
                    "reason": "why", "failures_30d": "failures (long window)", "last_seen": "last seen"}


def offenders_table(con, columns: list[tuple[str, str]]) -> str:
    present = [c for c in OFFENDER_COLUMNS if c in {name for name, _ in columns}]
    if not {"node", "recommendation", "reason"} <= set(present):
        return ""
    order = ' ORDER BY "position"' if "position" in present else ""
    rows = query(con, f'SELECT {", ".join(chr(34) + c + chr(34) for c in present)} FROM node_offenders{order} LIMIT {MAX_ROWS}')
    numeric = {i for i, c in enumerate(present) if c in ("position", "failures_30d")}
    return table([OFFENDER_COLUMNS[c] for c in present], [[esc(r[c]) for c in present] for r in rows], num=numeric)


def fleet_section(con, tables: set[str], name: str, title: str) -> str:
    out = f'<h2 id="{name}">{esc(title)}</h2>'
    if name not in tables:
        return out + not_computed(name)
    columns = table_columns(con, name)
    readable = {"port_hotspots": heatmap_section, "gpu_model_trends": trends_section, "node_offenders": offenders_table}
    shown = readable[name](con, columns) if name in readable else ""
    # every column of a table the fleet flow writes, in a box of its own that scrolls if the columns are many (the
    # page fits the window); on request only when a readable view is shown above
    every = f'<div class="scroll">{generic_table(con, name, columns)}</div>'
    return out + (shown + f"<details><summary>all columns</summary>{every}</details>" if shown else every)


def runs_section(con, tables: set[str]) -> str:
    if "runs" not in tables:
        return ""
    rows = query(con, "SELECT run_id, flow, started_at, finished_at, attempts, rules_version FROM runs "
                      "ORDER BY started_at DESC NULLS LAST LIMIT 10")
    if not rows:
        return ""
    return "<h2 id=\"runs\">Recent runs</h2>" + table(
        ["run", "flow", "started", "finished", "attempts", "rules_version"],
        [[esc(r["run_id"]), esc(r["flow"]), esc(r["started_at"]), esc(r["finished_at"]), esc(r["attempts"]),
          esc(r["rules_version"])] for r in rows], num={4})


def render_index(con, attempts: list[dict], tables: set[str], warehouse: str) -> str:
    toc = " · ".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("summary", "summary"), ("attempts", "attempts"), ("node_offenders", "node offenders"),
        ("port_hotspots", "port hot spots"), ("gpu_model_trends", "GPU model trends"), ("incidents", "incidents")))
    body = (f"<p>warehouse <code>{esc(warehouse)}</code> · {toc}</p>" + summary_section(attempts)
            + attempts_section(attempts)
            + fleet_section(con, tables, "node_offenders", "Node offenders")
            + fleet_section(con, tables, "port_hotspots", "Port hot spots")
            + fleet_section(con, tables, "gpu_model_trends", "GPU model trends")
            + fleet_section(con, tables, "incidents", "Incidents")
            + runs_section(con, tables))
    return page("firstfault — fleet report", body)


# ---------------------------------------------------------------------------------------------- attempt pages

def verdict_section(v: dict) -> str:
    rc = v.get("root_cause") or {}
    q = v.get("quality") or {}
    rows = [
        ("verdict", pill(v["verdict"])), ("state", esc(v["state"])),
        ("domain / subdomain", esc(f"{v['domain'] or '–'} / {v['subdomain'] or '–'}")),
        ("root cause", esc(rc.get("summary")) if rc else "–"),
        ("root event", esc(root_event_text(rc)) if rc else "–"),
        ("culprit nodes", f"<b>{esc(v['culprit_nodes'])}</b>"), ("culprit ranks", esc(v["culprit_ranks"])),
        ("granularity", esc(v["granularity"])), ("affected nodes", esc(v["affected_nodes"])),
        ("action", f"<b>{esc(v['action'])}</b>"), ("confidence", f"<b>{esc(q.get('confidence'))}</b>"),
        ("reasons", "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in q.get("reasons") or []) + "</ul>"),
        ("sources", esc(f"present: {', '.join(q.get('sources_present') or []) or '–'}; missing: "
                        f"{', '.join(q.get('sources_missing') or []) or '–'}; clock skew {q.get('clock_skew_s')} s")),
        ("attempt window", esc(f"{fmt_ts(v.get('start_ts'))} → {fmt_ts(v.get('end_ts'))}")),
        ("GPU model", esc(v.get("gpu_model"))), ("rules_version", esc(v["rules_version"])),
    ]
    body = "".join(f"<tr><td>{esc(k)}</td><td>{val}</td></tr>" for k, val in rows)
    return f'<h2>Verdict</h2><table class="kv">{body}</table>'


def root_event_text(rc: dict) -> str:
    parts = [rc.get("event") or "?"]
    for label, key in (("code", "code"), ("on", "node"), ("GPU", "gpu"), ("rank", "rank"), ("at", "ts"), ("rule", "rule")):
        if rc.get(key) is not None:
            parts.append(f"{label} {fmt_ts(parse_ts(rc[key])) if key == 'ts' else rc[key]}")
    return " ".join(parts)


def candidates_section(v: dict) -> str:
    cands = v.get("candidates") or []
    if not cands:
        return ""
    return "<h2>Candidates</h2>" + table(
        ["domain", "subdomain", "nodes", "score", "rule"],
        [[esc(c["domain"]), esc(c["subdomain"]), esc(c["nodes"]), esc(c["score"]), esc(c["rule"])] for c in cands],
        num={3})


def timeline_section(v: dict, evidence: list[dict], context: list[dict]) -> str:
    marks = [{"lane": e["node"] or "(job)", "ts": e["ts"], "role": e["role"],
              "label": f"{evidence_kinds(e)} {e['node'] or ''} rank {e['rank']}"} for e in evidence]
    marks += [{"lane": c["node"] or "(job)", "ts": c["ts"], "role": "context",
               "label": f"{c['kind']} ({c['role']}) {c['node'] or ''} rank {c['rank']}"} for c in context]
    lanes = list(dict.fromkeys([*(v.get("nodes") or []), *(m["lane"] for m in marks)]))
    root_ts = next((e["ts"] for e in evidence if e["role"] == "root_cause" and e["ts"] is not None), None)
    untimed = sum(1 for m in marks if m["ts"] is None)
    note = f"<p>{untimed} evidence item(s) without a timestamp are listed below only.</p>" if untimed else ""
    zoom = ""
    stamps = [m["ts"] for m in marks if m["ts"] is not None]
    if root_ts is not None and stamps and (max(stamps) - min(stamps)).total_seconds() > 600:
        window = (root_ts - timedelta(seconds=30), root_ts + timedelta(seconds=90))
        zoom = svg_timeline(marks, lanes, root_ts, window, title="Zoom: 30 s before to 90 s after the root cause")
    return ("<h2 id=\"timeline\">Timeline (UTC)</h2><p>One lane per node; the dashed red line is the root cause.</p>"
            + timeline_legend() + svg_timeline(marks, lanes, root_ts) + zoom + note)


_MAX_PROGRESS_SERIES = 8
_SERIES_COLOURS = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#5d4037", "#ad1457", "#546e7a")


def svg_progress(series: dict[str, list[tuple[datetime, int]]], end: datetime | None) -> str:
    """Iteration over time, one line per rank that logs progress; the attempt's end as a dashed line (the silence
    before it is what `hang` measures)."""
    width, height, left, right, top, bottom = 1160, 260, 80, 150, 28, 44
    stamps = [ts for points in series.values() for ts, _ in points] + ([end] if end else [])
    t0, t1 = min(map(_epoch, stamps)), max(map(_epoch, stamps))
    span = (t1 - t0) or 60.0
    ticks = nice_ticks(max(it for points in series.values() for _, it in points) or 1)

    def x(ts: datetime) -> float:
        return left + (width - left - right) * (_epoch(ts) - t0) / span

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - v / ticks[-1])

    parts = [f'<svg class="progress chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
             chart_title(left, "Training progress"), axis_label("y", 14, (height - bottom + top) / 2, "iteration", rotate=True),
             axis_label("x", (left + width - right) / 2, height - 6, "time (UTC)")]
    for v in ticks:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                     f'<text class="tick" x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{tick_text(v)}</text>')
    for t in time_ticks(t0, t0 + span):
        tx = left + (width - left - right) * (t - t0) / span
        parts.append(f'<text class="time-tick" x="{tx:.1f}" y="{height - bottom + 16}" text-anchor="middle">'
                     f'{datetime.fromtimestamp(t, timezone.utc):%H:%M:%S}</text>')
    if end is not None:  # labelled above the plot, left of the line: the series' labels are right of it
        parts.append(f'<line class="attempt-end" x1="{x(end):.1f}" x2="{x(end):.1f}" y1="{top}" y2="{height - bottom}" '
                     f'stroke="#6d4c41" stroke-dasharray="4,3"><title>attempt end {esc(fmt_ts(end))}</title></line>'
                     f'<text class="attempt-end-label" x="{x(end) - 4:.1f}" y="{top - 4}" text-anchor="end" fill="#6d4c41">'
                     'attempt end</text>')
    for i, (label, points) in enumerate(series.items()):
        colour = _SERIES_COLOURS[i % len(_SERIES_COLOURS)]
        coords = " ".join(f"{x(ts):.1f},{y(it):.1f}" for ts, it in points)
        last_ts, last_it = points[-1]
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>'
                     f'<circle cx="{x(last_ts):.1f}" cy="{y(last_it):.1f}" r="3.5" fill="{colour}">'
                     f'<title>{esc(label)}: iteration {last_it} at {esc(fmt_ts(last_ts))}</title></circle>'
                     f'<text x="{width - right + 8}" y="{top + 14 * (i + 1)}" fill="{colour}">{esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _epoch(ts: datetime) -> float:
    """Seconds since the epoch of a warehouse time (naive: UTC already) or of an aware one."""
    return (ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)).timestamp()


def progress_section(v: dict, points: list[dict]) -> str:
    """Iteration over time of the ranks that log progress (at most _MAX_PROGRESS_SERIES of them)."""
    if not points:
        return '<h2 id="progress">Training progress</h2><p>No progress markers (iteration or checkpoint lines) were read.</p>'
    series: dict[str, list[tuple[datetime, int]]] = {}
    for p in points:
        series.setdefault(f"{p['node'] or '(job)'} rank {p['rank'] if p['rank'] is not None else '?'}", []).append((p["ts"], p["iteration"]))
    shown = dict(list(series.items())[:_MAX_PROGRESS_SERIES])
    last = max(points, key=lambda p: (p["ts"], p["iteration"]))
    more = f" ({len(series) - len(shown)} more ranks not drawn)" if len(series) > len(shown) else ""
    return ('<h2 id="progress">Training progress</h2>'
            f"<p>Last progress: iteration {esc(last['iteration'])} at {esc(fmt_ts(last['ts']))} on {esc(last['node'] or '(job)')}"
            f"{more}.</p>" + svg_progress(shown, end if isinstance(end := parse_ts(v.get("end_ts")), datetime) else None))


def evidence_section(evidence: list[dict]) -> str:
    folder = common_folder([e["uri"] for e in evidence if e["uri"]])
    rows = []
    for e in evidence:
        shown = (e["uri"] or "").removeprefix(folder)
        where = f"{shown}:{e['line']}" if e["line"] is not None else shown
        link = f'<a href="{esc(e["uri"])}" title="{esc(e["uri"])}"><code>{clipped(where)}</code></a>' if e["uri"] else ""
        if e.get("locator"):
            link += f" <code>{clipped(e['locator'])}</code>"
        colour = ROLE_COLOURS.get(e["role"], "#333")
        rows.append([f'<span class="role" style="color:{colour}">{esc(e["role"])}</span>', esc(evidence_kinds(e)),
                     esc(e["node"]), esc(e["rank"]), esc(fmt_ts(e["ts"])), link,
                     f'<pre class="raw">{esc(e["text"] or "")}</pre>'])
    under = f'<p>Files under <code class="path">{esc(folder)}</code></p>' if folder else ""
    return (f"<h2>Evidence ({len(evidence)})</h2>" + under
            + table(["role", "kinds", "node", "rank", "time", "uri:line", "raw text"], rows))


def common_folder(uris: list[str]) -> str:
    """The folder (ending in /) every uri lies in, beyond the scheme: shown once above the evidence, so each line
    names its file by the rest of its path."""
    prefix = os.path.commonprefix([u.rsplit("/", 1)[0] + "/" for u in uris]) if uris else ""
    prefix = prefix[:prefix.rfind("/") + 1]
    return prefix if prefix.rstrip("/").count("/") > 2 else ""  # not a bare file:/// or s3://bucket/


def evidence_kinds(e: dict) -> str:
    """The kinds of the events read from an evidence line (a row from before `kinds`: its one kind, or its rule)."""
    return ", ".join(e.get("kinds") or [e["kind"] or e["rule_id"]])


def connectors_section(v: dict) -> str:
    reports = v.get("connector_reports") or []
    if not reports:
        return ""
    return "<h2>Sources read</h2>" + table(
        ["connector", "source", "uri", "status", "rows", "reason"],
        [[esc(r.get("connector")), esc(r.get("source")), esc(r.get("uri")), esc(r.get("status")), esc(r.get("rows")),
          esc(r.get("reason"))] for r in reports], num={4})


def render_attempt(con, v: dict) -> str:
    evidence = attempt_evidence(con, v["attempt_id"])
    context = context_events(con, v["attempt_id"])
    body = (verdict_section(v) + candidates_section(v) + timeline_section(v, evidence, context)
            + progress_section(v, progress_points(con, v["attempt_id"])) + evidence_section(evidence) + connectors_section(v))
    return page(f"attempt {v['attempt_id']}", body, up="../" * attempt_href(v["attempt_id"]).count("/"))


# ---------------------------------------------------------------------------------------------- entry points

def write_report(warehouse: str, out_dir: str = "firstfault-report") -> Path:
    """Render index.html and one page per failed attempt (attempt_href); returns the index path."""
    out = Path(out_dir)
    con = connect_reader(warehouse)  # first: a missing or unreadable warehouse leaves no empty folder behind
    try:
        (out / "attempts").mkdir(parents=True, exist_ok=True)
        tables = existing_tables(con)
        attempts = report_attempts(con)
        for v in attempts:
            if v["verdict"] in FAILED:
                target = out / attempt_href(v["attempt_id"])
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_whole(target, render_attempt(con, v))
        index = out / "index.html"
        _write_whole(index, render_index(con, attempts, tables, warehouse))
    finally:
        con.close()
    return index


def _write_whole(path: Path, text: str) -> None:
    """Write beside the page, then rename over it: a reader (or an interrupted run) never sees half a page."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
