"""Site rules and patterns from a config folder (docs/rules.md, "Worked example"), Python rules, and the rule test kit
(`firstfault rules test|lint`). The worked example's files below are those of docs/rules.md, verbatim."""
import json
import shutil
import sys
from pathlib import Path

import pytest

from firstfault.cli import main
from firstfault.config import load_config
from firstfault.errors import BadInput

BUILTIN_FIXTURES = Path(__file__).parents[1] / "rules_sql"

FIRSTFAULT_TOML = """\
[rules]
dirs = ["site-rules"]      # site SQL/Python rules and their fixture YAML
[patterns]
dirs = ["site-patterns"]   # site extraction patterns, merged after the built-in ones
"""

LUSTRE_PATTERN = """\
# Lustre client errors: "LustreError: <pid>:0:(<file>:<line>:<function>()) ... <fsname>-OST<index> ..."
- kind: lustre_error
  trigger: ["LustreError"]
  regex: 'LustreError: (?:\\d+:\\d+:\\((?P<location>[^)]*)\\) )?.*?(?P<target>[A-Za-z0-9]+-(?:OST|MDT)[0-9a-fA-F]{4})'
  set: {severity: error}
"""

LUSTRE_RULE = """\
-- id: lustre_error
-- detects: a Lustre client error (a ptlrpc request to an OST/MDT timed out or failed): the job stalled on storage
-- domain: software/filesystem
-- inputs: events(kind = lustre_error)
SELECT attempt_id, event_id, 'lustre_error' AS rule_id, 'root' AS role, 'software' AS domain, 'filesystem' AS subdomain,
       node AS culprit_node, NULL AS culprit_rank, NULL AS gpu, 'node' AS granularity, 0.6 AS strength, ts,
       printf('Lustre error on %s talking to %s', coalesce(node, '?'), coalesce(json_extract_string(fields, '$.target'), '?')) AS summary,
       'investigate' AS action
FROM events
WHERE kind = 'lustre_error'
"""

LUSTRE_LINE = ("Nov 29 01:40:03 node-02 kernel: LustreError: 4187:0:(client.c:1290:ptlrpc_expire_one_request()) @@@ ptlrpc "
               "request to scratch-OST0012 timed out: [sent 1795916400] req@ffff8a1b2c3d4000 "
               "o4->scratch-OST0012-osc-ffff8a1b2c3d4000@10.0.0.5@o2ib rc 0/-110")

LUSTRE_FIXTURES = """\
rule: lustre_error
cases:
  - name: ptlrpc_timeout_to_an_ost_is_a_filesystem_fault
    kind: positive
    logs:
      syslog/node-02:
        - "Nov 29 01:40:03 node-02 kernel: LustreError: 4187:0:(client.c:1290:ptlrpc_expire_one_request()) @@@ ptlrpc request to scratch-OST0012 timed out: [sent 1795916400] req@ffff8a1b2c3d4000 o4->scratch-OST0012-osc-ffff8a1b2c3d4000@10.0.0.5@o2ib rc 0/-110"
      applog:
        - "[2026-11-29 01:50:09,004] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 2536443) of binary: /usr/bin/python3"
    expect:
      verdict: attributed
      domain: software
      subdomain: filesystem
      culprit_nodes: [node-02]
      hits:
        - {rule_id: lustre_error, role: root, culprit_node: node-02}
  - name: a_lustre_reconnect_notice_is_not_an_error
    kind: negative
    logs:
      syslog/node-02:
        - "Nov 29 01:40:09 node-02 kernel: Lustre: scratch-OST0012-osc-ffff8a1b2c3d4000: Connection restored to 10.0.0.5@o2ib (at 10.0.0.5@o2ib)"
    expect:
      verdict: unattributed
      no_hits: [{rule_id: lustre_error}]
"""

# A Python rule (docs/rules.md, "Python rules"): errors from several nodes naming the same Lustre target confirm that the
# target, not one client node, stalled.
PYTHON_RULE = '''\
"""Lustre errors from two or more nodes naming the same OST/MDT confirm the filesystem cause."""
import json
from collections import defaultdict

import pyarrow as pa

RULE = {
    "id": "lustre_shared_target",
    "detects": "Lustre errors from two or more nodes naming the same OST/MDT",
    "domain": "software/filesystem",
    "inputs": "events(kind = lustre_error)",
}
COLUMNS = pa.schema([
    ("attempt_id", pa.string()), ("event_id", pa.string()), ("rule_id", pa.string()), ("role", pa.string()),
    ("domain", pa.string()), ("subdomain", pa.string()), ("culprit_node", pa.string()), ("culprit_rank", pa.int32()),
    ("gpu", pa.string()), ("granularity", pa.string()), ("strength", pa.float64()), ("ts", pa.timestamp("us")),
    ("summary", pa.string()), ("action", pa.string()),
])


def hits(con):
    by_target = defaultdict(list)
    for attempt_id, event_id, node, ts, fields in con.execute(
        "SELECT attempt_id, event_id, node, ts, fields FROM events WHERE kind = 'lustre_error' ORDER BY ts, event_id"
    ).fetchall():
        target = json.loads(fields or "{}").get("target")
        if target:
            by_target[(attempt_id, target)].append((event_id, node, ts))
    rows = []
    for (attempt_id, target), events in sorted(by_target.items()):
        nodes = sorted({node for _, node, _ in events if node})
        if len(nodes) < 2:
            continue
        for event_id, node, ts in events:
            rows.append({
                "attempt_id": attempt_id, "event_id": event_id, "rule_id": RULE["id"], "role": "confirmation",
                "domain": "software", "subdomain": "filesystem", "culprit_node": node, "culprit_rank": None,
                "gpu": None, "granularity": "group", "strength": 0.8, "ts": ts,
                "summary": f"{target} failed for {len(nodes)} nodes: {', '.join(nodes)}", "action": "investigate",
            })
    return pa.Table.from_pylist(rows, COLUMNS)
'''

PYTHON_FIXTURES = """\
rule: lustre_shared_target
cases:
  - name: two_nodes_failing_on_one_ost_confirm_the_filesystem
    kind: positive
    logs:
      syslog/node-01:
        - "Nov 29 01:40:04 node-01 kernel: LustreError: 11-0: scratch-OST0012-osc-ffff8a1b2c3d4000: operation ost_write to node 10.0.0.5@o2ib failed: rc = -110"
      syslog/node-02:
        - "Nov 29 01:40:03 node-02 kernel: LustreError: 11-0: scratch-OST0012-osc-ffff8a1b2c3d4000: operation ost_write to node 10.0.0.5@o2ib failed: rc = -110"
    expect:
      verdict: attributed     # both client nodes name one shared target and call for one action: one verdict
      domain: software
      hits:
        - {rule_id: lustre_shared_target, role: confirmation, culprit_node: node-01}
        - {rule_id: lustre_error, role: root, culprit_node: node-02}
  - name: one_node_alone_is_not_confirmed
    kind: negative
    logs:
      syslog/node-02:
        - "Nov 29 01:40:03 node-02 kernel: LustreError: 11-0: scratch-OST0012-osc-ffff8a1b2c3d4000: operation ost_write to node 10.0.0.5@o2ib failed: rc = -110"
    expect:
      no_hits: [{rule_id: lustre_shared_target}]
"""


def write_site(root: Path, *, python_rule: bool = False) -> Path:
    (root / "site-rules").mkdir(parents=True)
    (root / "site-patterns").mkdir()
    (root / "firstfault.toml").write_text(FIRSTFAULT_TOML)
    (root / "site-patterns" / "lustre.yaml").write_text(LUSTRE_PATTERN)
    (root / "site-rules" / "lustre_error.sql").write_text(LUSTRE_RULE)
    (root / "site-rules" / "lustre_error.yaml").write_text(LUSTRE_FIXTURES)
    if python_rule:
        (root / "site-rules" / "lustre_shared_target.py").write_text(PYTHON_RULE)
        (root / "site-rules" / "lustre_shared_target.yaml").write_text(PYTHON_FIXTURES)
    return root


def run(capsys, *args) -> tuple[int, str]:
    rc = main(list(args))
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def test_worked_example_site_rule_lint_test_and_attribute(tmp_path, monkeypatch, capsys):
    site = write_site(tmp_path / "site")
    monkeypatch.chdir(site)  # firstfault.toml of the working directory is the default config
    rc, out = run(capsys, "rules", "lint", "site-rules")
    assert rc == 0, out
    assert out.startswith("ok: ")
    rc, out = run(capsys, "rules", "test", "site-rules")
    assert rc == 0, out
    assert "PASS lustre_error::ptlrpc_timeout_to_an_ost_is_a_filesystem_fault" in out
    assert out.strip().endswith("2 passed, 0 failed")

    # attribute a tiny attempt with the site config: the new pattern and rule take part, the package is untouched
    attempt = tmp_path / "attempt"
    (attempt / "kernel").mkdir(parents=True)
    (attempt / "kernel" / "node-02.log").write_text(LUSTRE_LINE + "\n")
    (attempt / "attempt.yaml").write_text(json.dumps({
        "cluster": "site", "workload_id": "lustre-job", "attempt": 0, "state": "FAILED",
        "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z", "nodes": ["node-01", "node-02"],
        "logs": [{"source": "syslog", "path": "kernel/*.log"}],
    }))
    common = ("attribute", "--static", str(attempt / "attempt.yaml"), "--json", "--prefect", "never",
              "--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "wh.duckdb"))
    rc, out = run(capsys, *common, "--config", str(site / "firstfault.toml"))
    assert rc == 0, out
    v = json.loads(out)
    assert (v["verdict"], v["domain"], v["subdomain"], v["culprit_nodes"]) == ("attributed", "software", "filesystem", ["node-02"])
    # the built-in filesystem_error rule reads Lustre client errors too (its own event kind): both name the same cause
    assert v["root_cause"]["event"] in ("lustre_error", "lustre_client_error") and "scratch-OST0012" in v["root_cause"]["summary"]
    with_site = v["rules_version"]

    monkeypatch.chdir(tmp_path)  # no firstfault.toml here: built-in rules and patterns only
    rc, out = run(capsys, *common)
    assert rc == 0, out
    v = json.loads(out)
    assert (v["verdict"], v["root_cause"]["rule"]) == ("attributed", "filesystem_error") and v["rules_version"] != with_site


def test_config_rule_and_pattern_dirs(tmp_path):
    site = write_site(tmp_path / "site")
    config = load_config(str(site / "firstfault.toml"))
    assert config.rules.dirs == (str(site.resolve() / "site-rules"),)
    assert config.patterns.dirs == (str(site.resolve() / "site-patterns"),)
    for text, field in (('[rules]\ndir = ["x"]\n', "rules.dir"), ('[patterns]\ndirs = "site-patterns"\n', "patterns.dirs"),
                        ('[rules]\ndirs = ["missing"]\n', "rules.dirs")):
        (site / "bad.toml").write_text(text)
        with pytest.raises(BadInput) as e:
            load_config(str(site / "bad.toml"))
        assert e.value.field == field
    (site / "bad.toml").write_text('[rules]\ndir = ["x"]\n')
    assert main(["rules", "lint", "--config", str(site / "bad.toml")]) == 2


def test_python_rule_runs_with_the_sql_rules(tmp_path, monkeypatch, capsys):
    site = write_site(tmp_path / "site", python_rule=True)
    monkeypatch.chdir(site)
    path_before, modules_before = list(sys.path), set(sys.modules)
    rc, out = run(capsys, "rules", "lint", "site-rules")
    assert rc == 0, out
    assert "1 Python" in out
    rc, out = run(capsys, "rules", "test", "site-rules")
    assert rc == 0, out
    assert "PASS lustre_shared_target::two_nodes_failing_on_one_ost_confirm_the_filesystem" in out
    assert out.strip().endswith("4 passed, 0 failed")
    assert sys.path == path_before
    assert not any("lustre_shared_target" in m for m in set(sys.modules) - modules_before)


def test_lint_checks_python_rule_columns_and_header(tmp_path, capsys):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "wrong_columns.py").write_text(
        'RULE = {"id": "wrong_columns", "detects": "x", "domain": "software/x", "inputs": "events"}\n'
        "def hits(con):\n    return con.sql(\"SELECT 1 AS x\")\n")
    (rules / "no_header.py").write_text('RULE = {"id": "no_header"}\ndef hits(con):\n    return None\n')
    (rules / "helper.py").write_text("X = 1  # no RULE: a helper module, not a rule\n")
    rc, out = run(capsys, "rules", "lint", str(rules))
    assert rc == 1
    assert "wrong_columns.py: field 'columns'" in out
    assert "no_header.py: field 'detects': rule header key missing" in out
    assert "helper.py" not in out


def test_broken_expectation_makes_rules_test_exit_1(tmp_path, capsys):
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    text = (BUILTIN_FIXTURES / "segfault.yaml").read_text()
    assert "      subdomain: nccl\n" in text
    (fixtures / "segfault.yaml").write_text(text.replace("      subdomain: nccl\n", "      subdomain: driver\n", 1))
    rc, out = run(capsys, "rules", "test", str(fixtures))
    assert rc == 1
    assert "FAIL segfault::segfault_inside_libnccl_points_at_nccl" in out
    assert "subdomain: expected 'driver', got 'nccl'" in out
    assert "PASS segfault::a_segfault_long_before_the_attempt_does_not_count" in out
    assert out.strip().endswith(f"{text.count('  - name: ') - 1} passed, 1 failed")


def test_malformed_fixture_exits_2_naming_file_and_field(tmp_path, capsys):
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "segfault.yaml").write_text("rule: segfault\ncases:\n  - name: x\n    kind: maybe\n    expect: {}\n")
    rc, out = run(capsys, "rules", "test", str(fixtures))
    assert rc == 2
    assert "segfault.yaml: field 'cases[0].kind'" in out


def test_lint_catches_missing_negative_case_and_duplicate_id(tmp_path, capsys):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "lustre_error.sql").write_text(LUSTRE_RULE)
    positive_only = LUSTRE_FIXTURES[: LUSTRE_FIXTURES.index("  - name: a_lustre_reconnect")]
    (rules / "lustre_error.yaml").write_text(positive_only)
    shutil.copy(Path(__file__).parents[1] / "rules_sql" / "segfault.sql", rules / "segfault.sql")  # a built-in id again
    rc, out = run(capsys, "rules", "lint", str(rules))
    assert rc == 1
    assert "no negative fixture case for rule 'lustre_error'" in out
    assert "no positive fixture case for rule 'lustre_error'" not in out
    assert f"{rules / 'segfault.sql'}: field 'id': duplicate rule id" in out


def test_the_docs_show_the_worked_example_verbatim():
    doc = (Path(__file__).parents[1] / "docs" / "rules.md").read_text()
    for text in (FIRSTFAULT_TOML, LUSTRE_PATTERN, LUSTRE_RULE, LUSTRE_FIXTURES, PYTHON_RULE):
        assert text in doc
