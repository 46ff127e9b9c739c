"""Hostile input through the whole `firstfault attribute` process: random bytes, newline floods, invalid UTF-8 mixed
into real lines, gzip bombs, flight-recorder pickles that repeat one entry by reference, fan out, nest 200,000 deep or
hold millions of memo references, FIFOs named as inputs, ids YAML would read as numbers or times, and log URLs with
percent-encoded dots and separators. The process exits only 0 or 2, never prints a traceback, its peak memory stays
under a fixed bound, and a URL is fetched as the path it was checked as, or refused."""
from __future__ import annotations

import gzip
import json
import os
import pickle
import posixpath
import subprocess
import sys
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from static_site import StaticSite

from firstfault.connectors.urls import NotNormal, url_key

from test_flight_recorder_bounds import ENTRY, fan_out, memo_reference_dump, nested_dump

PEAK_RSS_LIMIT_MB = 1536
XID = b"Nov 29 01:10:02 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
REAL_LINES = [XID, b"0: [rank0]:[E1129 01:20:05.000000123 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
              b"operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
              b"for 600061 milliseconds before timing out.\n", b"Traceback (most recent call last):\n"]


def newline_flood(mb: int) -> bytes:
    return b"\n" * (mb << 20)


def latin1_mixed(lines: list[bytes]) -> bytes:
    return b"".join(line.rstrip(b"\n") + b" caf\xe9 \xff\xfe\n" for line in lines)


def gzip_bomb(mb: int) -> bytes:
    """One line of `mb` MiB after a real one: ~1000:1 (the ratio cut itself is tested in test_connectors.py)."""
    return gzip.compress(XID + b"A" * (mb << 20), compresslevel=9)


log_bytes = st.one_of(
    st.binary(max_size=4096),
    st.lists(st.sampled_from(REAL_LINES), max_size=20).map(latin1_mixed),
    st.sampled_from([1, 2]).map(newline_flood),
    st.lists(st.one_of(st.binary(max_size=64), st.sampled_from(REAL_LINES)), max_size=30).map(b"".join),
)
pickles = st.one_of(
    st.none(),
    st.binary(max_size=512),
    st.integers(1, 200_000).map(lambda n: pickle.dumps({"entries": [{"collective_seq_id": 1, "state": "scheduled",
                                                                     "profiling_name": "nccl:all_reduce"}] * n})),
    st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=20)),
                 lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
                 max_leaves=30).map(lambda obj: pickle.dumps({"entries": obj})),
    st.integers(1, 8).map(lambda levels: pickle.dumps({"rank": 0, "entries": [dict(ENTRY, profiling_name=fan_out(levels))]})),
    st.integers(1, 200_000).map(nested_dump),
    st.integers(1, 5_000_000).map(memo_reference_dump),
)
# a FIFO where one input should be: it must be refused, never waited on
fifos = st.sampled_from([None, "node-01.log", "_dump_1", "metrics.csv"])
# ids as written in YAML: plain scalars YAML would read as numbers or times, and ids with surrounding spaces
ids = st.one_of(st.sampled_from(["fuzz", "0x1F", "017", "12:30", "1.10", "1_000", "true", "'job '", "' job'"]),
                st.text(max_size=12).map(json.dumps))


def run_attribute(tmp_path, log: bytes | None, compressed: bool, dump: bytes | None, fifo: str | None = None,
                  workload_id: str = "fuzz", url: str | None = None) -> tuple[int, str, int]:
    name = "node-01.log.gz" if compressed and fifo != "node-01.log" else "node-01.log"
    if fifo is not None:
        os.mkfifo(tmp_path / fifo)
    if log is not None and name != fifo:
        (tmp_path / name).write_bytes(log)
    spec = {"start": "2026-11-29T01:00:00Z", "end": "2026-11-29T02:00:00Z", "nodes": ["node-01", "node-02"],
            "state": "FAILED", "logs": [{"source": "syslog", "path": url or name}], "metrics": ["metrics.csv"]}
    if dump is not None or fifo == "_dump_1":
        if dump is not None:
            (tmp_path / "_dump_0").write_bytes(dump)
        spec["flight_recorder"] = ["_dump_*"]
    (tmp_path / "attempt.yaml").write_text(f"workload_id: {workload_id}\ncluster: {workload_id}\n" + yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(tmp_path / "rss"), sys.executable, "-m", "firstfault.cli",
                           "attribute", "--static", str(tmp_path / "attempt.yaml"), "--lake", str(tmp_path / "lake"),
                           "--warehouse", str(tmp_path / "w.duckdb")], capture_output=True, text=True, env=env, timeout=600)
    peak_kb = int((tmp_path / "rss").read_text().split()[-1])
    return done.returncode, done.stderr, peak_kb >> 10


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.data_too_large])
@given(log=log_bytes, compressed=st.booleans(), dump=pickles, fifo=fifos, workload_id=ids)
@example(log=gzip_bomb(96), compressed=True, dump=None, fifo=None, workload_id="fuzz")
@example(log=newline_flood(2), compressed=False, dump=None, fifo=None, workload_id="fuzz")
@example(log=latin1_mixed(REAL_LINES * 3), compressed=False, dump=pickle.dumps({"entries": [{"state": "x"}] * 500_000}),
         fifo=None, workload_id="fuzz")
@example(log=XID, compressed=False, dump=pickle.dumps({"rank": 0, "entries": [dict(ENTRY, state=fan_out(8))]}), fifo=None,
         workload_id="fuzz")  # fan-out
@example(log=XID, compressed=False, dump=nested_dump(200_000), fifo=None, workload_id="fuzz")  # depth
@example(log=XID, compressed=False, dump=memo_reference_dump(5_000_000), fifo=None, workload_id="fuzz")  # memo references
@example(log=XID, compressed=False, dump=None, fifo="node-01.log", workload_id="fuzz")  # a FIFO as a log
@example(log=XID, compressed=False, dump=None, fifo="_dump_1", workload_id="fuzz")  # a FIFO as a dump
@example(log=XID, compressed=False, dump=None, fifo="metrics.csv", workload_id="fuzz")  # a FIFO as a metrics file
@example(log=XID, compressed=False, dump=None, fifo=None, workload_id="12:30")  # an id YAML reads as a time
@example(log=XID, compressed=False, dump=None, fifo=None, workload_id="'job '")  # an id with a trailing space
def test_hostile_input_exits_0_or_2_without_traceback_in_bounded_memory(tmp_path_factory, log, compressed, dump, fifo, workload_id):
    tmp_path = tmp_path_factory.mktemp("hostile")
    if compressed and not log.startswith(b"\x1f\x8b"):
        log = gzip.compress(log)
    code, stderr, peak_mb = run_attribute(tmp_path, log, compressed, dump, fifo, workload_id)
    assert code in (0, 2), stderr
    assert "Traceback" not in stderr, stderr
    assert peak_mb < PEAK_RSS_LIMIT_MB, f"peak RSS {peak_mb} MB"


# pieces of a URL path: plain names, dots and separators written plainly, percent-encoded (either case), twice
URL_PIECES = ["logs", "secret", "node-01.log", "node-02.log", "..", ".", "%2e%2e", "%2E%2e", ".%2e", "%2e", "..%2f",
              "%2f", "%2F", "%5c", "..%5c", "%252e%252e", "%6cogs", "%00", "%ff"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with StaticSite(tmp_path_factory.mktemp("site")) as running:
        yield running


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(URL_PIECES), min_size=1, max_size=6))
@example(pieces=["logs", "%2e%2e", "secret", "node-02.log"])
@example(pieces=["logs", "%2E%2e", "secret", "node-02.log"])
@example(pieces=["logs", ".%2e", "secret", "node-02.log"])
@example(pieces=["logs", "%2e", "..", "secret", "node-02.log"])
@example(pieces=["logs", "..%2fsecret", "node-02.log"])
@example(pieces=["logs", "%2e%2e%2Fsecret%2Fnode-02.log"])
@example(pieces=["logs", "..%5csecret%5cnode-02.log"])
@example(pieces=["logs", "%252e%252e", "secret", "node-02.log"])
@example(pieces=["logs", "%ff", "node-01.log"])
@example(pieces=["%6cogs", "node-01.log"])
@example(pieces=["logs", "node-01.log"])
def test_a_log_url_is_fetched_as_the_path_it_was_checked_as_or_refused(tmp_path_factory, site, pieces):
    tmp_path = tmp_path_factory.mktemp("url")
    url = site.url + "/" + "/".join(pieces)
    site.asked.clear()
    code, stderr, peak_mb = run_attribute(tmp_path, None, False, None, url=url)
    assert "Traceback" not in stderr, stderr
    try:
        checked = "/" + "/".join(url_key(url).segments)
    except NotNormal:
        assert code == 2 and "logs[0].path" in stderr and not site.asked, (code, stderr, site.asked)
        return
    assert code == 0, stderr
    # the server decodes and resolves what it is asked, as many do: it read the file the check saw
    assert {posixpath.normpath(unquote(urlsplit(asked).path)) for asked in site.asked} <= {checked}, site.asked
    assert peak_mb < PEAK_RSS_LIMIT_MB
