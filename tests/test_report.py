"""`firstfault report`: the offline HTML view of a warehouse, rendered for real in headless Chromium, and the run
summary published as Prefect artifacts."""
import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import duckdb
import pytest

from firstfault.cli import main
from firstfault.flows.artifacts import publish_artifacts
from firstfault.schema import FLEET_TABLES
from firstfault.warehouse.report import attempt_href, write_report

HEADLINE = "demo/demo-headline/0"
REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory):
    from firstfault.synthetic.demo import run_demo

    warehouse, attempt_ids = run_demo(str(tmp_path_factory.mktemp("report-demo")))
    return warehouse, attempt_ids


@pytest.fixture(scope="module")
def report_dir(demo_warehouse, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    assert main(["report", "--warehouse", demo_warehouse[0], "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def hostile_warehouse(demo_warehouse, tmp_path_factory):
    """A copy of the demo warehouse with script tags in log text and fleet tables present."""
    path = str(tmp_path_factory.mktemp("hostile") / "w.duckdb")
    shutil.copy(demo_warehouse[0], path)
    con = duckdb.connect(path)
    con.execute("UPDATE attribution_evidence SET text = '<script>alert(\"pwn\")</script> & NCCL WARN' "
                "WHERE attempt_id = ? AND position = 2", [HEADLINE])
    con.execute("""
        CREATE OR REPLACE TABLE node_offenders AS SELECT * FROM (VALUES
            ('node-02', 'demo', 3, 0.9, TIMESTAMP '2026-11-29 02:10:03'),
            ('gpu-b2', 'demo', 1, 0.4, TIMESTAMP '2026-11-29 03:37:12')) t(node, cluster, failures, score, last_seen);
        CREATE OR REPLACE TABLE port_hotspots AS SELECT * FROM (VALUES
            ('leaf-01', 'p17', 4), ('leaf-01', 'p18', 1), ('leaf-02', 'p03', 2)) t(switch, port, failures);
        CREATE OR REPLACE TABLE gpu_model_trends AS SELECT * FROM (VALUES
            ('H100', '2026-W46', 0.10, 0.05, 0.18), ('H100', '2026-W47', 0.22, 0.12, 0.35),
            ('H100', '2026-W48', 0.15, 0.08, 0.25), ('B200', '2026-W47', 0.30, 0.10, 0.60),
            ('B200', '2026-W48', 0.05, 0.01, 0.20)) t(gpu_model, week, rate, rate_lo, rate_hi);
        CREATE OR REPLACE TABLE incidents AS SELECT * FROM (VALUES
            ('inc-1', 'node-02', '<img src=x onerror=alert(1)>')) t(incident_id, node, summary);
    """)
    con.close()
    return path


def headline_page(out: Path) -> Path:
    return out / "attempts" / "demo" / "demo-headline" / "0.html"  # a name a person reads


def test_headline_page_names_the_cause_the_symptoms_and_the_evidence(report_dir):
    text = headline_page(report_dir).read_text()
    assert "node-02" in text and "Xid 149" in text and "NETIR_LINK_EVT" in text
    assert "gpu_nvlink" in text and "drain_node" in text and "high" in text
    assert "NCCL WARN" in text and "nccl_net_ib" in text and "torch_watchdog_timeout" in text
    assert re.search(r'href="file://[^"]*/headline/kernel/node-02\.log"[^>]*><code>(<[^>]+>)*kernel/node-02\.log:3<', text)  # uri:line of the root cause
    assert 'class="timeline chart"' in text and 'class="root-cause"' in text
    for node in ("node-01", "node-02", "node-03"):
        assert f">{node}</text>" in text  # one lane per node
    assert "2026-11-29 02:10:03 UTC" in text
    assert "<script" not in text and "http://" not in text and "https://" not in text  # offline, no JS, no CDN


def test_each_evidence_line_is_one_row_naming_every_kind_read_from_it(report_dir, demo_warehouse):
    from firstfault.warehouse.read import stored_verdicts

    evidence = stored_verdicts(demo_warehouse[0], [HEADLINE])[0]["evidence"]
    text = headline_page(report_dir).read_text()
    assert f"<h2>Evidence ({len(evidence)})</h2>" in text
    places = re.findall(r'<a href="(file://[^"]*)" title="[^"]*"><code>(?:<[^>]+>)*[^<]*:(\d+)<', text.split("<h2>Evidence")[1])
    assert len(places) == len(evidence) == len(set(places))
    assert "exception_line, nccl_result" in text


def test_index_lists_every_attempt_and_links_the_failed_ones(report_dir, demo_warehouse):
    index = (report_dir / "index.html").read_text()
    con = duckdb.connect(demo_warehouse[0], read_only=True)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
    for table in FLEET_TABLES:  # whatever the demo computes: a section, or the note
        assert (f'id="{table}"' in index) and ((table in tables) != (f"has no <code>{table}</code>" in index))
    for attempt_id in demo_warehouse[1]:
        assert attempt_id in index
    con = duckdb.connect(demo_warehouse[0], read_only=True)
    failed = [r[0] for r in con.execute("SELECT attempt_id FROM attributions WHERE verdict <> 'not_failed'").fetchall()]
    con.close()
    for attempt_id in failed:
        href = attempt_href(attempt_id)
        assert f'href="{href}"' in index and (report_dir / href).is_file()
    assert not (report_dir / attempt_href("demo/demo-success/0")).exists()
    assert 'href="../../../index.html"' in headline_page(report_dir).read_text()  # back to the fleet summary


def test_page_names_are_readable_and_stay_inside_the_report():
    assert attempt_href("demo/demo-headline/0") == "attempts/demo/demo-headline/0.html"
    assert attempt_href("c/../0") == "attempts/c/~2E~2E/0.html"
    assert attempt_href("c/w x/1") == "attempts/c/w~20x/1.html"


def test_fleet_sections_say_not_computed_yet_without_their_tables(demo_warehouse, tmp_path):
    path = str(tmp_path / "bare.duckdb")
    shutil.copy(demo_warehouse[0], path)
    con = duckdb.connect(path)
    for table in FLEET_TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    con.close()
    index = write_report(path, str(tmp_path / "out")).read_text()
    for table in FLEET_TABLES:
        assert f"not computed yet: the warehouse has no <code>{table}</code>" in index


def test_fleet_tables_of_the_fleet_rebuild_render(demo_warehouse, tmp_path):
    from firstfault.warehouse.fleet import rebuild

    path = str(tmp_path / "fleet.duckdb")
    shutil.copy(demo_warehouse[0], path)
    rebuild(path)
    index = write_report(path, str(tmp_path / "out")).read_text()
    assert "not computed yet" not in index
    assert "Attempts implicated, by" in index and ">ib-03</text>" in index  # the IB link case's host
    assert "H100: failures per 1,000 GPU-hours, all domains, shaded: its interval" in index
    assert 'class="axis-label x"' in index and ">ISO week</text>" in index
    offenders = index.split('id="node_offenders"')[1].split('id="port_hotspots"')[0]
    assert "node-02" in offenders and "<th>recommendation</th>" in offenders and "<th>why</th>" in offenders
    assert "<details><summary>all columns</summary>" in offenders


def test_log_text_and_table_values_are_escaped_and_fleet_sections_render(hostile_warehouse, tmp_path):
    index = write_report(hostile_warehouse, str(tmp_path))
    page = headline_page(tmp_path).read_text()
    assert "&lt;script&gt;alert(&quot;pwn&quot;)&lt;/script&gt; &amp; NCCL WARN" in page
    assert "<script" not in page
    text = index.read_text()
    assert "not computed yet" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "<img" not in text
    assert "failures by switch and port" in text and ">leaf-01</text>" in text and ">p17</text>" in text
    assert "H100: failure rate, shaded: its interval" in text and "B200: failure rate" in text
    assert "<polygon" in text  # the interval band


def test_attempts_newest_first_evidence_linked_and_the_zoom_label_matches_its_window(report_dir):
    attempts = (report_dir / "index.html").read_text().split('id="attempts"')[1].split('id="node_offenders"')[0]
    assert "newest first" in attempts
    places = [attempts.index(a) for a in ("demo/demo-unattributed/0", "demo/demo-python-exception/0", "demo/demo-headline/0")]
    assert places == sorted(places)  # 12:00, 07:00, 01:00
    page = headline_page(report_dir).read_text()
    assert re.search(r'<a href="file://[^"]*/headline/kernel/node-02\.log"[^>]*><code>(<[^>]+>)*kernel/node-02\.log:3(</[^>]+>)*</code></a>', page)
    zoom = page.split("Zoom: 30 s before to 90 s after the root cause")[1]
    assert "2026-11-29 02:09:33 UTC → 2026-11-29 02:11:33 UTC" in zoom  # the root cause is at 02:10:03


def test_round_ticks_and_no_single_point_drawn_as_a_trend():
    from firstfault.warehouse.report import nice_ticks, svg_trend, time_ticks

    assert time_ticks(1000.0, 1120.0) == [1005.0, 1020.0, 1035.0, 1050.0, 1065.0, 1080.0, 1095.0, 1110.0]
    assert time_ticks(0.0, 4800.0) == [0.0, 600.0, 1200.0, 1800.0, 2400.0, 3000.0, 3600.0, 4200.0, 4800.0]

    assert nice_ticks(0.35) == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert nice_ticks(7.3) == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert nice_ticks(0.0) == [0.0, 1.0]
    one = svg_trend([("2026-W48", 0.2, 0.1, 0.3)], title="t", x_label="ISO week", y_label="rate")
    assert "<polyline" not in one and "one ISO week only: no trend yet" in one
    two = svg_trend([("2026-W47", 0.2, None, None), ("2026-W48", 0.3, None, None)], title="t", x_label="week", y_label="r")
    assert 'class="trend"' in two


def test_report_of_a_missing_warehouse_is_bad_input(tmp_path, capsys):
    assert main(["report", "--warehouse", str(tmp_path / "nope.duckdb"), "--out", str(tmp_path / "r")]) == 2
    assert "nope.duckdb" in capsys.readouterr().err


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.fail("chromium is not installed: `apt-get install -y --no-install-recommends chromium` "
                    "(.ci/run installs it); the report must be rendered in a real browser")
    return exe


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(profile)})


def png_facts(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the decoded image data) from the PNG itself."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.mark.parametrize("which", ["index", "headline"])
def test_pages_render_in_headless_chromium(report_dir, tmp_path, which):
    target = report_dir / "index.html" if which == "index" else headline_page(report_dir)
    png = tmp_path / f"{which}.png"
    shot = run_chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,1600", target.as_uri())
    assert png.is_file(), f"no screenshot: {shot.stderr[-2000:]}"
    width, height, distinct = png_facts(png)
    assert (width, height) == (1280, 1600)
    assert png.stat().st_size > 40_000, "screenshot suspiciously small (blank page?)"
    assert distinct > 50, "screenshot looks blank"
    dom = run_chromium(tmp_path, "--dump-dom", target.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    if which == "index":
        assert "Fleet summary" in dom.stdout and "demo/demo-headline/0" in dom.stdout and "<svg" in dom.stdout
    else:
        assert "Xid 149" in dom.stdout and "node-02" in dom.stdout and 'class="root-cause"' in dom.stdout


def test_publish_artifacts_from_a_flow(prefect_api, hostile_warehouse):
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    @task
    def publish(path):
        return publish_artifacts(path)

    @flow
    def tiny_nightly(path):
        return publish(path)

    ids = tiny_nightly(hostile_warehouse)
    assert len(ids) == 4  # summary, attempts, node_offenders, port_hotspots
    keys = ["firstfault-summary", "firstfault-attempts", "firstfault-node-offenders", "firstfault-port-hotspots"]
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
    by_key = {a.key: a for a in found}
    assert set(by_key) == set(keys)
    assert all(re.fullmatch(r"[a-z0-9-]+", k) for k in by_key)
    assert by_key["firstfault-summary"].type == "markdown" and "demo/demo-headline/0" in by_key["firstfault-summary"].data
    assert by_key["firstfault-attempts"].type == "table" and "node-02" in str(by_key["firstfault-attempts"].data)
    assert all(a.flow_run_id is not None for a in found)


# The DOM as Chromium lays it out, read by a probe page that loads the report page in a frame of the viewport's width
# (the page itself has no script): elements wider than the viewport, and every chart's title, axis names and ticks.
PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="%s" style="width:%dpx;height:1000px;border:0"></iframe><pre id="facts"></pre>
<script>
document.getElementById("page").addEventListener("load", () => {
  const doc = document.getElementById("page").contentDocument;
  const viewport = doc.documentElement.clientWidth;
  const wide = [...doc.body.querySelectorAll("*")].filter(el => {
      const box = el.getBoundingClientRect(); return box.width > 0 && box.right > viewport + 1; })
    .map(el => el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ? "." + el.className : ""));
  const charts = [...doc.querySelectorAll("svg.chart")].map(svg => ({
    title: (svg.querySelector(".chart-title") || {}).textContent || "",
    x: (svg.querySelector(".axis-label.x") || {}).textContent || "",
    y: (svg.querySelector(".axis-label.y") || {}).textContent || "",
    ticks: [...svg.querySelectorAll(".tick")].map(t => t.textContent),
    times: [...svg.querySelectorAll(".time-tick")].map(t => t.textContent),
    ends: [...svg.querySelectorAll(".attempt-end")].length,
    end_labels: [...svg.querySelectorAll(".attempt-end-label")].map(t => t.textContent)}));
  // words of table cells broken across lines: a word laid out in more than one box; in the raw log text only a word
  // longer than its cell's line may be
  const broken = [];
  for (const cell of doc.querySelectorAll("th, td")) {
    const raw = cell.querySelector("pre.raw");
    const walker = doc.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = doc.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const boxes = [...range.getClientRects()].filter(r => r.width > 0);
        const longer = raw && boxes.reduce((sum, r) => sum + r.width, 0) > raw.clientWidth;
        if (boxes.length > 1 && !longer) broken.push(word[0]);
      }
    }
  }
  // the summary's charts (after its heading, before the attempts'): how far each row of them reaches across the page
  const [summary, after] = [doc.getElementById("summary"), doc.getElementById("attempts")];
  const rows = {};
  for (const svg of summary && after ? doc.querySelectorAll("svg.chart") : []) {
    if (!(summary.compareDocumentPosition(svg) & Node.DOCUMENT_POSITION_FOLLOWING)) continue;
    if (!(after.compareDocumentPosition(svg) & Node.DOCUMENT_POSITION_PRECEDING)) continue;
    const box = svg.getBoundingClientRect();
    const row = rows[Math.round(box.top)] || (rows[Math.round(box.top)] = {left: box.left, right: box.right});
    row.left = Math.min(row.left, box.left); row.right = Math.max(row.right, box.right);
  }
  const filled = Object.values(rows).map(r => (r.right - r.left) / summary.getBoundingClientRect().width);
  const shown = () => [...doc.querySelectorAll("#attempts-table tbody tr")].filter(r => r.offsetParent !== null).length;
  const filtered = {};
  for (const id of ["verdict-attributed", "domain-hardware"]) {
    const button = doc.getElementById(id);
    if (button) { button.click(); filtered[id] = shown(); doc.getElementById(id.split("-")[0] + "-all").click(); }
  }
  document.getElementById("facts").textContent = JSON.stringify({viewport, wide, charts, filtered, broken, filled});
});
</script></body></html>"""
SCREENSHOTS = Path(os.environ.get("FIRSTFAULT_SCREENSHOTS", REPO_ROOT / "build" / "report-screenshots"))


def layout_facts(tmp_path: Path, target: Path, width: int) -> dict:
    probe = tmp_path / f"probe-{target.stem}-{width}.html"
    probe.write_text(PROBE % (target.as_uri(), width))
    dom = run_chromium(tmp_path, "--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="facts">(.*?)</pre>', dom.stdout, re.S)
    assert found and found.group(1), f"the probe found nothing: {dom.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.parametrize("width", [1024, 1280])
@pytest.mark.parametrize("which", ["index", "headline"])
def test_the_rendered_report_fits_the_window_and_every_chart_is_titled_with_named_axes(
        demo_warehouse, tmp_path, which, width):
    from firstfault.warehouse.fleet import rebuild

    path = str(tmp_path / "fleet.duckdb")
    shutil.copy(demo_warehouse[0], path)
    rebuild(path)
    out = tmp_path / "report"
    index = write_report(path, str(out))
    target = index if which == "index" else headline_page(out)
    facts = layout_facts(tmp_path, target, width)
    assert width - 80 < facts["viewport"] <= width  # less the vertical scroll bar
    assert facts["wide"] == [], f"wider than the window: {facts['wide'][:10]}"
    assert facts["broken"] == [], f"words broken across lines: {facts['broken'][:10]}"
    assert facts["charts"], "no chart found"
    if which == "index":  # the filters (radio buttons and CSS, no script) show the rows of one verdict or domain
        con = duckdb.connect(path, read_only=True)
        want = con.execute("SELECT count(*) FILTER (WHERE verdict = 'attributed'), count(*) FILTER (WHERE domain = 'hardware') "
                           "FROM attributions").fetchone()
        con.close()
        assert facts["filtered"] == {"verdict-attributed": want[0], "domain-hardware": want[1]}
        # the summary's charts share their rows: no row of them leaves a tenth of the page's width blank
        assert facts["filled"] and min(facts["filled"]) > 0.9, f"rows of the summary's charts fill {facts['filled']}"
    for chart in facts["charts"]:
        assert chart["title"] and chart["x"] and chart["y"], chart
        assert all(re.fullmatch(r"\d+(\.\d)?", t) for t in chart["ticks"]), chart["ticks"]  # round: at most one decimal
        assert all(re.fullmatch(r"\d\d:\d\d:\d[05]", t) for t in chart["times"]), chart["times"]  # whole 5 s or more
        assert chart["end_labels"] == ["attempt end"] * chart["ends"], chart  # the dashed end line says what it is
    if which == "headline":
        assert any(chart["ends"] for chart in facts["charts"]), "no progress chart with the attempt's end"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    png = SCREENSHOTS / f"{which}-{width}.png"
    run_chromium(tmp_path, f"--screenshot={png}", f"--window-size={width},2400", target.as_uri())
    assert png.is_file() and png_facts(png)[:2] == (width, 2400)


def test_one_time_format_on_every_page(report_dir):
    for page in (report_dir / "index.html", headline_page(report_dir)):
        text = re.sub(r'<pre class="raw">.*?</pre>', "", page.read_text(), flags=re.S)  # log lines keep their own
        text = re.sub(r"</?span[^>]*>", "", text)  # the words of a stamp are kept whole in spans of their own
        stamps = re.findall(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?Z?(?: UTC)?", text)
        assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3})? UTC", s) for s in stamps), \
            sorted({s for s in stamps if not s.endswith(" UTC")})[:5]


def test_the_cause_chart_names_attempts_without_a_domain_by_their_verdict(report_dir):
    index = (report_dir / "index.html").read_text()
    chart = index.split("Failed attempts by cause")[1].split("</svg>")[0]
    assert ">unattributed</text>" in chart and "–/–" not in chart


def test_pages_are_written_whole(demo_warehouse, tmp_path, monkeypatch):
    # a page is renamed into place once written: a failure while rendering leaves the previous page, not half a page
    import firstfault.warehouse.report as report

    out = tmp_path / "report"
    write_report(demo_warehouse[0], str(out))
    before = (out / "index.html").read_text()
    monkeypatch.setattr(report, "render_index", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_report(demo_warehouse[0], str(out))
    assert (out / "index.html").read_text() == before
    assert not list(out.rglob("*.partial"))
