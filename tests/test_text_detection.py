"""Text or binary: NUL bytes are stripped before a log is judged (a power loss leaves NUL runs in a kernel log), a
file is binary only when more than 10 % of the rest of its first 64 KiB is control bytes (other than TAB, CR, LF, FF
and ESC) or invalid UTF-8 and either it starts with a binary format's signature or its first chunk has no text line
of 16 characters, and a UTF-16 log with a byte order mark is decoded."""
import gzip
import json
import os
import random

import pytest
import yaml

from firstfault.cli import main
from firstfault.transforms.lines import is_binary_file, looks_binary, split_lines

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


# garbage without a text line: random bytes whose lines are at most 15 characters of text or hold control bytes
GARBAGE = bytes(random.Random(7).choices(b"\x00\x01\x02\x7f\xfe\xffab\n", k=32 << 10))
# a program (or its core dump) holds readable lines: its help text
PROGRAM = b"\x7fELF\x02\x01\x01\x00" + GARBAGE[:4096] + b"\nUsage: trainer [OPTION]... run one training step\n" + GARBAGE[:4096]


@pytest.mark.parametrize("name, data", [
    ("garbage without a text line, then a line glued to garbage", GARBAGE + XID.encode()),
    ("a program with an Xid in its help text", PROGRAM + XID.encode()),
    ("a gzip without its extension", gzip.compress((OTHER + XID).encode() * 100)),
])
def test_a_binary_file_is_skipped(tmp_path, capsys, name, data):
    xids, report = attribute_xids(tmp_path, capsys, data)
    assert xids == 0 and report["status"] == "skipped" and report["reason"] == "binary content, not a text log", name


@pytest.mark.parametrize("name, data", [
    ("garbage, then the Xid on a line of its own", GARBAGE + b"\n" + XID.encode()),
    ("a text line, then a program", OTHER.encode() + PROGRAM + b"\n" + XID.encode()),
])
def test_a_text_log_with_binary_in_it_keeps_its_xid(tmp_path, capsys, name, data):
    xids, report = attribute_xids(tmp_path, capsys, data)
    assert xids == 1 and report["status"] == "ok" and "skipped lines" in report["reason"], (name, report)


def test_one_text_line_of_16_characters_makes_a_file_text():
    assert is_binary_file(GARBAGE + b"\n" + b"x" * 15 + b"\n")
    assert not is_binary_file(GARBAGE + b"\n" + b"x" * 16 + b"\n")
    assert not is_binary_file(GARBAGE + b"\n" + b"x" * 15 + b"\x01" + b"\n")  # 1 of 16 not text: within 10 %
    assert is_binary_file(GARBAGE + b"\n" + b"x" * 15 + b"\x01\x01" + b"\n")  # 2 of 17: not a text line
    assert is_binary_file(b"\x7fELF" + GARBAGE + b"\n" + b"x" * 100 + b"\n")  # a signature decides
    assert not is_binary_file(b"\x7fELF" + b"x" * 100 + b"\n")  # unless the start does not look binary


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
