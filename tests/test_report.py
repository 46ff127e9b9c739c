"""`firstfault report`: the offline HTML view of a warehouse, rendered for real in headless Chromium, and the run
summary published as Prefect artifacts."""
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
from firstfault.ids import attempt_key
from firstfault.flows.artifacts import publish_artifacts
from firstfault.schema import FLEET_TABLES
from firstfault.warehouse.report import write_report

HEADLINE = "demo/demo-headline/0"
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
    return out / "attempts" / f"{attempt_key(HEADLINE)}.html"


def test_headline_page_names_the_cause_the_symptoms_and_the_evidence(report_dir):
    text = headline_page(report_dir).read_text()
    assert "node-02" in text and "Xid 149" in text and "NETIR_LINK_EVT" in text
    assert "gpu_nvlink" in text and "drain_node" in text and "high" in text
    assert "NCCL WARN" in text and "nccl_net_ib" in text and "torch_watchdog_timeout" in text
    assert re.search(r"headline/kernel/node-02\.log:3\b", text)  # uri:line of the root cause
    assert 'class="timeline"' in text and 'class="root-cause"' in text
    for node in ("node-01", "node-02", "node-03"):
        assert f">{node}</text>" in text  # one lane per node
    assert "2026-11-29 02:10:03 UTC" in text
    assert "<script" not in text and "http://" not in text and "https://" not in text  # offline, no JS, no CDN


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
        href = f"attempts/{attempt_key(attempt_id)}.html"
        assert f'href="{href}"' in index and (report_dir / href).is_file()
    assert not (report_dir / "attempts" / f"{attempt_key('demo/demo-success/0')}.html").exists()


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
    assert "Heat map: attempts implicated by" in index and ">ib-03</text>" in index  # the IB link case's host
    assert "rate_per_1k_gpu_hours per iso_week, all domains (band: rate_lower … rate_upper)" in index
    assert ">H100: " in index or "H100: rate" in index
    assert "node-02" in index.split('id="node_offenders"')[1].split('id="port_hotspots"')[0]


def test_log_text_and_table_values_are_escaped_and_fleet_sections_render(hostile_warehouse, tmp_path):
    index = write_report(hostile_warehouse, str(tmp_path))
    page = headline_page(tmp_path).read_text()
    assert "&lt;script&gt;alert(&quot;pwn&quot;)&lt;/script&gt; &amp; NCCL WARN" in page
    assert "<script" not in page
    text = index.read_text()
    assert "not computed yet" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "<img" not in text
    assert "Heat map: failures by switch × port" in text and ">leaf-01</text>" in text and ">p17</text>" in text
    assert "H100: rate per week (band: rate_lo … rate_hi)" in text and "B200: rate per week" in text
    assert "<polygon" in text  # the interval band


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
