"""What a command stores and does never depends on whether anyone reads its output: `attribute --slurm` with
[actions] on records its decision (and drains) even when stdout is a pipe whose reader is gone (`| head -3`)."""
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import warehouse_rows

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
XID = "Nov 30 10:31:20 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"


def fake_slurm(root: Path) -> Path:
    """sacct answers job 2 (FAILED on node1), `scontrol show job` knows no job, `scontrol update` and `sinfo` are
    recorded (one JSON argv a line in calls.jsonl); returns the scontrol path."""
    spec = {"helpformat": (FIXTURES / "sacct-22.05-helpformat.txt").read_text(),
            "text": (FIXTURES / "sacct-22.05-traceback.txt").read_text(), "calls": str(root / "calls.jsonl")}
    (root / "spec.json").write_text(json.dumps(spec))
    script = (f"#!{sys.executable}\n"
              "import json, os, sys\n"
              f"spec = json.load(open({str(root / 'spec.json')!r}))\n"
              "tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]\n"
              "open(spec['calls'], 'a').write(json.dumps([tool, *args]) + '\\n')\n"
              "if tool == 'sinfo':\n"
              "    print('node1')\n"
              "elif tool == 'scontrol' and 'show' in args:\n"
              "    sys.exit('slurm_load_jobs error: Invalid job id specified')\n"
              "elif tool == 'sacct':\n"
              "    print(spec['helpformat' if '--helpformat' in args else 'text'], end='')\n")
    for tool in ("sacct", "scontrol", "sinfo"):
        (root / tool).write_text(script)
        (root / tool).chmod(0o755)
    return root / "scontrol"


def test_a_closed_stdout_skips_no_action(tmp_path):
    scontrol = fake_slurm(tmp_path)
    (tmp_path / "kernel-node1.log").write_text(XID)
    config = tmp_path / "firstfault.toml"
    config.write_text(f"""
[slurm]
enabled = true
sacct = "{tmp_path / 'sacct'}"
scontrol = "{scontrol}"
logs = {{syslog = "{tmp_path}/kernel-{{node}}.log"}}

[lake]
root = "{tmp_path / 'lake'}"

[warehouse]
path = "{tmp_path / 'wh.duckdb'}"

[actions]
enabled = true
dry_run = false
max_fraction = 1.0
min_confidence = "medium"
""")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command prints anything
    try:
        done = subprocess.run([sys.executable, "-m", "firstfault.cli", "attribute", "--slurm", "2", "--config", str(config)],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    rows = warehouse_rows(tmp_path / "wh.duckdb", "SELECT attempt_id, node, status FROM actions")
    assert rows == [{"attempt_id": "ci/2/0", "node": "node1", "status": "done"}]
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert ["scontrol", "update", "NodeName=node1", "State=DRAIN"] in [c[:4] for c in calls]
