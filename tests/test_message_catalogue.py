"""The message catalogue (transforms/messages/*.yaml, docs/rules.md#the-message-catalogue): every file loads and
validates, and every example, landed as its own small attempt and attributed with all the others in ONE run, yields
its entry's event kind and `expect` columns and plays its entry's role. A failure names the entry id."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from firstfault.cli import main
from firstfault.errors import BadInput
from firstfault.landing import events_from_lines
from firstfault.rules_sql.catalogue import check_catalogue
from firstfault.transforms.messages import catalogue_dir, load_catalogue

MESSAGES = load_catalogue()
TAXONOMY = Path(__file__).parents[1] / "docs" / "taxonomy.md"


@pytest.fixture(scope="module")
def results():
    return {r.message.id: r for r in check_catalogue(MESSAGES)}


@pytest.mark.parametrize("entry", [m.id for m in MESSAGES])
def test_entry_renders_and_plays_its_role(results, entry):
    assert results[entry].handled, f"{entry}: " + "; ".join(results[entry].problems)


def test_catalogue_ships_every_file_as_package_data():
    assert {m.file for m in MESSAGES} == {p.name for p in catalogue_dir().glob("*.yaml")}


def test_taxonomy_lists_every_class_the_catalogue_uses():
    """docs/taxonomy.md's domain table follows from the catalogue: every root class appears in it."""
    rows, domain = set(), None
    for line in TAXONOMY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
        if len(cells) == 3 and re.fullmatch(r"[a-z_]*", cells[0]) and re.fullmatch(r"[a-z0-9_]+", cells[1]):
            domain = cells[0] or domain
            rows.add(f"{domain}/{cells[1]}")
    used = {m.cls for m in MESSAGES if m.cls}
    assert used <= rows, f"classes missing from docs/taxonomy.md: {sorted(used - rows)}"


GOOD = """emitter: linux_kernel
repository: torvalds/linux
messages:
  - id: test.oom
    path: mm/oom_kill.c
    tag: v6.8
    format: 'Killed process %d (%s)'
    kind: host_oom
    class: application/host_oom
    role: root
    scope: node
    source: syslog
    examples:
      - line: 'Out of memory: Killed process 1 (python)'
        rendered: true
"""


@pytest.mark.parametrize("old, new, field", [
    ("role: root", "role: culprit", "test.oom.role"),
    ("scope: node", "scope: rack", "test.oom.scope"),
    ("source: syslog", "source: dmesg", "test.oom.source"),
    ("class: application/host_oom", "class: firmware/host_oom", "test.oom.class"),
    ("class: application/host_oom", "class: null", "test.oom.class"),
    ("role: root", "role: symptom", "test.oom.class"),  # a symptom has no class
    ("    tag: v6.8\n", "", "test.oom.tag"),
    ("    kind: host_oom\n", "", "test.oom.kind"),
    ("        rendered: true\n", "", "test.oom.examples[0]"),
    ("        rendered: true\n", "        rendered: true\n        url: https://example.org/1\n", "test.oom.examples[0]"),
    ("        rendered: true\n", "        rendered: true\n        expect: {colour: red}\n", "test.oom.examples[0].expect.colour"),
    ("id: test.oom", "id: Oom", "Oom.id"),
])
def test_a_bad_entry_is_named_with_its_field(tmp_path, old, new, field):
    assert old in GOOD
    (tmp_path / "x.yaml").write_text(GOOD.replace(old, new), encoding="utf-8")
    with pytest.raises(BadInput) as e:
        load_catalogue(tmp_path)
    assert e.value.field == field, str(e.value)


def test_a_near_miss_may_name_the_class_it_nearly_was(tmp_path):
    (tmp_path / "x.yaml").write_text(GOOD.replace("role: root", "role: near_miss"), encoding="utf-8")
    [m] = load_catalogue(tmp_path)
    assert (m.role, m.cls) == ("near_miss", "application/host_oom")


def test_an_id_is_unique_across_files(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text(GOOD, encoding="utf-8")
    with pytest.raises(BadInput, match="duplicate id, also in a.yaml"):
        load_catalogue(tmp_path)


def test_a_good_file_loads(tmp_path):
    (tmp_path / "x.yaml").write_text(GOOD, encoding="utf-8")
    [m] = load_catalogue(tmp_path)
    assert (m.id, m.emitter, m.repository, m.version, m.cls, m.examples[0].lines) == (
        "test.oom", "linux_kernel", "torvalds/linux", "v6.8", "application/host_oom", ("Out of memory: Killed process 1 (python)",))


def test_coverage_lists_each_entry_with_totals_per_emitter_and_overall(tmp_path, capsys):
    unhandled = GOOD.replace("test.oom", "test.unknown").replace("kind: host_oom", "kind: no_such_kind")
    (tmp_path / "a.yaml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(unhandled.replace("emitter: linux_kernel", "emitter: other"), encoding="utf-8")
    assert main(["-q", "rules", "coverage", "--catalogue", str(tmp_path), "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["emitter"], r["id"], r["entries"], r["handled"]) for r in rows] == [
        ("linux_kernel", "test.oom", 1, 1), ("linux_kernel", "*", 1, 1),
        ("other", "test.unknown", 1, 0), ("other", "*", 1, 0), ("*", "*", 2, 1)]
    assert "expected a no_such_kind event" in rows[2]["problem"] and rows[0]["problem"] is None


def test_coverage_names_a_malformed_catalogue_file_and_field(tmp_path, capsys):
    (tmp_path / "x.yaml").write_text(GOOD.replace("scope: node", "scope: rack"), encoding="utf-8")
    assert main(["rules", "coverage", "--catalogue", str(tmp_path)]) == 2
    assert "field 'test.oom.scope'" in capsys.readouterr().err


@pytest.mark.parametrize("source, line", [
    # format strings as written and the documented pattern text are no log lines
    ("syslog", "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s"),
    ("syslog", "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u): %d, pid=%s, name=%s, %s"),
    ("syslog", "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u): %d, pid=%s, name=%s, %s"),
    ("syslog", r"NVRM: Xid \((?:PCI:)?(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?(?: GPU-I:(?P<gi>\d+))?"
               r"(?: GPU-CI:(?P<ci>\d+))?\): (?P<xid>\d+),(?: pid=(?P<pid>[^,]*),)?(?: name=(?P<name>[^,]*),)? ?(?P<msg>.*)$"),
    ("syslog", "Port module event: module %u, %s                 # Cable plugged | Cable unplugged"),
    ("syslog", "Port module event[error]: module %u, %s, %s      # Power budget exceeded | Bus stuck(I2C or data shorted)"),
    # an AER bit line needs the kernel's device prefix
    ("applog", "[rank0]:  [1] Timeout"),
    ("applog", "worker  [14] CmpltTO"),
    # a shell's "Killed" guesses at nothing: no OOM record
    ("applog", "Killed"),
    ("applog", "/var/spool/slurmd/job123/slurm_script: line 12: 44821 Killed                  python train.py"),
    # tools failing after a loss, and tool output that is no event
    ("applog", "nvidia-container-cli.real: detection error: nvml error: unknown error: unknown"),
    ("applog", "        Uncorrectable Error               : 4"),
    ("applog", "nvidia-smi --query-gpu=ecc.errors.uncorrected.volatile.total,remapped_rows.pending --format=csv"),
    # free text that names NVIDIA without a product, and the staged scheduler text outside the scheduler's log
    ("syslog", "Nov 29 01:00:02 node-01 nvidia-persistenced: Started NVIDIA Persistence Daemon"),
    ("syslog", "Nov 29 01:00:03 node-01 nv-fabricmanager: NVIDIA Fabric Manager started"),
    ("applog", "2026-11-28T11:42:10Z kubernetes: pod ml/p-0 on gpu-node-03 container trainer terminated reason=OOMKilled exit_code=137 signal=9"),
])
def test_text_that_is_no_message_yields_no_event(source, line):
    assert events_from_lines([line], source).is_empty()
