"""Text or binary: NUL bytes are stripped before a log is judged (a power loss leaves NUL runs in a kernel log), a
file is binary only when more than 10 % of the rest of its first 64 KiB is control bytes (other than TAB, CR, LF, FF
and ESC) or invalid UTF-8, and a UTF-16 log with a byte order mark is decoded."""
import json
import os

import pytest
import yaml

from firstfault.cli import main
from firstfault.transforms.lines import looks_binary, split_lines

XID = "Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
OTHER = "Nov 29 01:09:00 node-01 kernel: eth0: link up\n"


def attribute_xids(tmp_path, capsys, data: bytes) -> tuple[int, dict]:
    """The Xid 79 events landed from a kernel log of `data`, and the log's connector report."""
    (tmp_path / "node-01.log").write_bytes(data)
    spec = tmp_path / "attempt.yaml"
    spec.write_text(yaml.safe_dump({"workload_id": "w", "start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z",
                                    "nodes": ["node-01"], "state": "FAILED", "logs": [{"source": "syslog", "path": "node-01.log"}]}))
    args = ["--lake", str(tmp_path / "lake"), "--warehouse", str(tmp_path / "w.duckdb")]
    assert main(["attribute", "--static", str(spec), *args]) == 0
    capsys.readouterr()
    assert main(["sql", *args, "--format", "json", "SELECT (SELECT count(*) FROM lake.events WHERE code = 79) AS xids, "
                 "r.status, r.reason FROM connector_reports r WHERE r.uri LIKE '%node-01.log'"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    return row["xids"], row


@pytest.mark.parametrize("name, data", [
    ("NUL bytes at line ends", (OTHER.rstrip("\n") + "\0\0\0\n").encode() * 3 + XID.encode()),
    ("NUL lines at the head", b"\0" * 4096 + b"\n" + b"\0" * 100 + b"\n" + (OTHER + XID).encode()),
    ("a NUL run longer than 64 KiB", b"\0" * (200 << 10) + b"\n" + (OTHER + XID).encode()),
    ("UTF-16 LE with a BOM", (OTHER + XID).encode("utf-16")),
    ("UTF-16 BE with a BOM", b"\xfe\xff" + (OTHER + XID).encode("utf-16-be")),
])
def test_text_logs_keep_their_xid(tmp_path, capsys, name, data):
    xids, report = attribute_xids(tmp_path, capsys, data)
    assert xids == 1 and report["status"] == "ok", (name, report)


def test_a_binary_file_is_skipped(tmp_path, capsys):
    data = bytes(range(1, 32)) * 2000 + XID.encode()
    xids, report = attribute_xids(tmp_path, capsys, data)
    assert xids == 0 and report["status"] == "skipped" and report["reason"] == "binary content, not a text log"


def test_the_binary_share_is_of_control_bytes_and_invalid_utf8_without_nuls():
    text = b"x" * 90
    assert not looks_binary(text + b"\x01" * 10)          # 10 %: text
    assert looks_binary(text + b"\x01" * 11)              # 11 %: binary
    assert looks_binary(text + b"\xff" * 11)              # invalid UTF-8 counts
    assert not looks_binary(text + b"\t\r\n\f\x1b" * 4)   # TAB, CR, LF, FF, ESC are text
    assert not looks_binary(b"\0" * 100_000 + text)       # NULs are left aside
    assert not looks_binary("é".encode() * 50)            # valid multi-byte UTF-8
    assert not looks_binary(b"x" * (64 << 10) + b"\x01" * 100_000)  # only the first 64 KiB count


def test_nul_bytes_are_stripped_from_lines_and_counted():
    frame, stats = split_lines(b"a\0b\n\0\0\0\nc\n", 1, 1000)
    assert frame["raw"].to_list() == ["ab", "", "c"] and stats.binary == 2 and stats.lines == 3
