"""The headline case end to end through the CLI."""
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from firstfault.cli import main


@pytest.fixture()
def headline(tmp_path, demo_dir):
    target = tmp_path / "headline"
    shutil.copytree(demo_dir / "attempts" / "headline", target)
    return target


def run_json(capsys, *args):
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def line_at(uri: str, line: int) -> str:
    return Path(urlparse(uri).path).read_text(encoding="utf-8").splitlines()[line - 1]


def test_headline_verdict_and_evidence(headline, tmp_path, capsys):
    v = run_json(capsys, "attribute", "--static", str(headline / "attempt.yaml"), "--json",
                 "--warehouse", str(tmp_path / "wh.duckdb"), "--lake", str(tmp_path / "lake"))
    assert (v["verdict"], v["domain"], v["subdomain"], v["culprit_nodes"]) == ("attributed", "hardware", "gpu_nvlink", ["node-02"])
    assert v["root_cause"]["event"] == "xid" and v["root_cause"]["code"] == 149
    assert v["root_cause"]["gpu"] == "0000:3b:00" and v["culprit_ranks"] == [11]
    assert {s["node"] for s in v["symptoms"] if s["event"].startswith("nccl")} == {"node-01", "node-02", "node-03"}
    roots = [e for e in v["evidence"] if e["role"] == "root_cause"]
    assert len(roots) == 1 and "NVRM: Xid (PCI:0000:3b:00): 149, NETIR_LINK_EVT Fatal" in line_at(roots[0]["uri"], roots[0]["line"])
    nccl = [e for e in v["evidence"] if e["role"] == "symptom" and "NCCL WARN" in e["text"]]
    assert len(nccl) >= 3
    for e in nccl:
        assert line_at(e["uri"], e["line"]) == e["text"]
    assert v["schema_version"] == "1" and len(v["rules_version"]) == 12
    assert v["quality"]["confidence"] == "high"


def test_spec_without_nodes_exits_2_with_one_line(tmp_path, capsys):
    spec = tmp_path / "attempt.yaml"
    spec.write_text("workload_id: w\nstart: '2026-11-29T01:00:00Z'\n")
    assert main(["attribute", "--static", str(spec), "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "attempt.yaml" in err and "nodes" in err


def test_binary_file_is_reported_and_verdict_unchanged(headline, tmp_path, capsys):
    args = ["attribute", "--static", str(headline / "attempt.yaml"), "--json", "--lake", str(tmp_path / "lake")]
    before = run_json(capsys, *args, "--warehouse", str(tmp_path / "a.duckdb"))
    (headline / "app" / "core.log").write_bytes(bytes(range(256)) * 4096)
    after = run_json(capsys, *args, "--warehouse", str(tmp_path / "b.duckdb"))
    report = [r for r in after["connector_reports"] if r["uri"].endswith("core.log")]
    assert report and report[0]["status"] == "skipped" and "binary" in report[0]["reason"]
    keys = ("verdict", "domain", "subdomain", "culprit_nodes", "culprit_ranks", "root_cause")
    assert {k: after[k] for k in keys} == {k: before[k] for k in keys}


def test_missing_source_is_reported_not_fatal(headline, tmp_path, capsys):
    (headline / "kernel" / "node-01.log").unlink()
    v = run_json(capsys, "attribute", "--static", str(headline / "attempt.yaml"), "--json",
                 "--warehouse", str(tmp_path / "w.duckdb"), "--lake", str(tmp_path / "lake"))
    assert v["verdict"] == "attributed"
    assert any(r["status"] == "missing" and "node-01" in r["uri"] for r in v["connector_reports"])


def test_sql_is_read_only(headline, tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    main(["attribute", "--static", str(headline / "attempt.yaml"), "--warehouse", wh, "--lake", str(tmp_path / "lake")])
    capsys.readouterr()
    assert main(["sql", "SELECT verdict FROM attributions", "--warehouse", wh, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["verdict", "attributed"]
    assert main(["sql", "DELETE FROM attributions", "--warehouse", wh]) == 2


# --- what the documents show is what the program prints ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def matches(documented, actual) -> bool:
    """A documented value against the printed one: `…` in a documented string stands for any text; a documented object
    may leave keys out, a documented list entries (each must be one of the printed list's)."""
    if isinstance(documented, str):
        return isinstance(actual, str) and re.fullmatch(re.escape(documented).replace(re.escape("…"), ".*"), actual) is not None
    if isinstance(documented, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in documented.items())
    if isinstance(documented, list):
        return isinstance(actual, list) and all(any(matches(d, a) for a in actual) for d in documented)
    return documented == actual


def in_order(documented: list[str], printed: list[str]) -> list[str]:
    """The documented lines that do not match a printed line after the previous one's match."""
    missing, at = [], 0
    for line in documented:
        found = next((i for i in range(at, len(printed)) if matches(line, printed[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


def block_after(text: str, command: str) -> list[str]:
    """The lines of the plain ``` block that follows the ```sh block ending with `command`."""
    after = text.split(f"{command}\n```\n\n```\n", 1)[1]
    return after.split("\n```", 1)[0].splitlines()


def test_the_documented_headline_output_is_what_the_program_prints(demo_dir, tmp_path, capsys):
    spec = str(demo_dir / "attempts" / "headline" / "attempt.yaml")
    where = ["--warehouse", str(tmp_path / "wh.duckdb"), "--lake", str(tmp_path / "lake")]
    assert main(["attribute", "--static", spec, *where]) == 0
    printed = capsys.readouterr().out.splitlines()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = block_after(readme, "firstfault attribute --static firstfault-demo/attempts/headline/attempt.yaml")
    assert any(line.lstrip().startswith("symptoms: ") for line in documented)
    assert in_order(documented, printed) == []
    verdict = run_json(capsys, "attribute", "--static", spec, "--json", *where)
    page = (ROOT / "docs" / "verdict.md").read_text(encoding="utf-8")
    example = json.loads(page.split("```json\n", 1)[1].split("\n```", 1)[0])
    for key in ("quality", "candidates", "symptoms", "evidence", "connector_reports", "root_cause", "culprit_ranks"):
        assert matches(example[key], verdict[key]), key
    count = re.search(r"the headline has (\d+) symptoms on (\d+) lines", " ".join(page.split()))
    assert count and (int(count[1]), int(count[2])) == (len(verdict["symptoms"]), len({(s["uri"], s["line"]) for s in verdict["symptoms"]}))


def test_the_documented_text_form_is_what_the_program_prints(demo_dir, tmp_path, capsys):
    attempt = tmp_path / "attempts" / "python-exception"  # the page's case: its syslog files missing
    shutil.copytree(demo_dir / "attempts" / "python-exception", attempt)
    shutil.rmtree(attempt / "kernel")
    assert main(["attribute", "--static", str(attempt / "attempt.yaml"), "--warehouse", str(tmp_path / "wh.duckdb"),
                 "--lake", str(tmp_path / "lake")]) == 0
    printed = capsys.readouterr().out.splitlines()
    page = (ROOT / "docs" / "verdict.md").read_text(encoding="utf-8")
    documented = page.split("## The human-readable form", 1)[1].split("```\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert in_order(documented, printed) == []
