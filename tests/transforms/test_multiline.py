"""Multi-line assemblers (transforms/multiline.py): tracebacks, torchrun ChildFailedError blocks, `Last error:`."""

from __future__ import annotations

import json

import polars as pl
import pytest

from firstfault.schema import EVENT_SCHEMA, LINE_SCHEMA
from firstfault.transforms.extract import extract_events, lines_frame, load_patterns
from firstfault.transforms.multiline import (
    ASSEMBLERS,
    is_multiline_candidate,
    assemble_nccl_last_error,
    assemble_python_exceptions,
    assemble_torchrun_failures,
)


def _frame(lines: list[str], *, rank: list[int | None] | None = None, node: list[str | None] | None = None,
           uri: str = "mem://test") -> pl.DataFrame:
    df = lines_frame(lines, uri=uri)
    if rank is not None:
        df = df.with_columns(pl.Series("rank", rank, dtype=pl.Int32))
    if node is not None:
        df = df.with_columns(pl.Series("node", node, dtype=pl.String))
    return df


def _run(asm, df: pl.DataFrame) -> pl.DataFrame:
    """Run one assembler over the candidate lines (as the engine does: trigger lines only, no order)."""
    cand = df.filter(is_multiline_candidate(pl.col("msg"))).sample(fraction=1.0, shuffle=True, seed=7)
    out = asm(cand.lazy()).collect()
    assert out.schema == pl.Schema(EVENT_SCHEMA)
    return out.sort("uri", "line")


def _fields(row: dict) -> dict:
    return json.loads(row["fields"])


# ------------------------------------------------------------------------------------------ python tracebacks

INTERLEAVED = [
    "[rank0]: Traceback (most recent call last):",
    "[rank1]: Traceback (most recent call last):",
    '[rank0]:   File "train.py", line 10, in <module>',
    '[rank1]:   File "train.py", line 12, in <module>',
    "[rank1]:     loss.backward()",
    "[rank0]:     main()",
    "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered",
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited or there "
    "was a network error, NCCL version 2.21.5",
    "[rank0]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "[rank0]: Last error:",
]


def test_interleaved_rank_tracebacks_are_demultiplexed_by_prefix():
    out = _run(assemble_python_exceptions, _frame(INTERLEAVED))
    rows = out.to_dicts()
    assert [(r["line"], r["rank"], r["code_text"]) for r in rows] == [
        (7, 1, "RuntimeError"),
        (8, 0, "torch.distributed.DistBackendError"),
    ]
    assert _fields(rows[0])["traceback_line"] == "2"
    assert _fields(rows[1])["traceback_line"] == "1"
    assert _fields(rows[0])["message"] == "CUDA error: an illegal memory access was encountered"
    assert all(_fields(r)["innermost"] == "true" for r in rows)
    assert rows[0]["event_id"] == "applog:0:7:python_exception"
    assert rows[0]["message"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert rows[0]["raw"] == INTERLEAVED[6]


def test_interleaved_rank_tracebacks_are_demultiplexed_by_rank_column():
    # real lines arrive with the `[rankN]: ` prefix already stripped into `rank`
    stripped = [line.split(": ", 1)[1] for line in INTERLEAVED]
    ranks = [int(line[5]) for line in INTERLEAVED]
    out = _run(assemble_python_exceptions, _frame(stripped, rank=ranks))
    assert [(r["line"], r["rank"], r["code_text"]) for r in out.to_dicts()] == [
        (7, 1, "RuntimeError"),
        (8, 0, "torch.distributed.DistBackendError"),
    ]


def test_files_are_separate_streams():
    # the ValueError of file b (line 2) must not end file a's traceback (lines 1-3)
    a = _frame(["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "KeyError: 'x'"], uri="mem://a")
    b = _frame(["noise", "ValueError: not after a traceback"], uri="mem://b")
    out = _run(assemble_python_exceptions, pl.concat([a, b]).with_columns(pl.Series("file_index", [0, 0, 0, 1, 1], dtype=pl.Int32)))
    assert out.select("uri", "line", "code_text").rows() == [("mem://a", 3, "KeyError")]


CHAIN = [
    "Traceback (most recent call last):",
    '  File "a.py", line 1, in f',
    "KeyError: 'weight'",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "a.py", line 5, in g',
    "RuntimeError: failed to load checkpoint",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "a.py", line 9, in main',
    "SystemExit: 1",
    "some unrelated output",
    "Traceback (most recent call last):",
    '  File "b.py", line 2, in h',
    "ValueError: second, independent traceback",
]


def test_chained_exceptions_mark_the_innermost():
    rows = _run(assemble_python_exceptions, _frame(CHAIN)).to_dicts()
    got = [(r["line"], r["code_text"], _fields(r)["chain_index"], _fields(r)["innermost"], _fields(r)["chain_len"])
           for r in rows]
    assert got == [
        (3, "KeyError", "0", "true", "3"),
        (9, "RuntimeError", "1", "false", "3"),
        (15, "SystemExit", "2", "false", "3"),
        (19, "ValueError", "0", "true", "1"),
    ]


def test_multiline_message_continuation_is_not_another_exception():
    lines = [
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "torch.distributed.DistBackendError: NCCL error in: x.hpp:1, unhandled system error, NCCL version 2.18.1",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        "Failures:",
    ]
    rows = _run(assemble_python_exceptions, _frame(lines)).to_dicts()
    assert [r["line"] for r in rows] == [3]


def test_log_level_words_are_not_exception_classes():
    lines = ["Traceback (most recent call last):", "ERROR: something else", "WARNING: x", "OSError: [Errno 5] I/O"]
    rows = _run(assemble_python_exceptions, _frame(lines)).to_dicts()
    assert [(r["line"], r["code_text"]) for r in rows] == [(4, "OSError")]


# ------------------------------------------------------------------------------------------ torchrun blocks


def _block(script: str, failures: list[tuple], root: tuple) -> list[str]:
    """A ChildFailedError block; an entry is (idx, rank, local_rank, exitcode, pid, host, traceback)."""

    def entry(e):
        idx, rank, lr, code, pid, host, tb = e
        return [
            f"[{idx}]:",
            "  time      : 2023-06-14_22:36:10",
            f"  host      : {host}",
            f"  rank      : {rank} (local_rank: {lr})",
            f"  exitcode  : {code} (pid: {pid})",
            "  error_file: <N/A>",
            f"  traceback : {tb}",
        ]

    out = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 40, f"{script} FAILED",
           "-" * 40, "Failures:"]
    if failures:
        for f in failures:
            out += entry(f)
    else:
        out.append("  <NO_OTHER_FAILURES>")
    out += ["-" * 40, "Root Cause (first observed failure):", *entry(root), "=" * 40]
    return out


def test_root_cause_entry_is_flagged_and_fields_are_parsed():
    lines = _block(
        "train.py",
        [(1, 9, 1, -15, 1001, "node-b", "Signal 15 (SIGTERM) received by PID 1001")],
        (0, 8, 0, -6, 1000, "node-b", "Signal 6 (SIGABRT) received by PID 1000"),
    )
    rows = _run(assemble_torchrun_failures, _frame(lines)).to_dicts()
    assert len(rows) == 2
    other, root = rows
    assert (other["rank"], other["local_rank"], other["exit_code"], other["signal"], other["pid"]) == (9, 1, -15, 15, 1001)
    assert (root["rank"], root["local_rank"], root["exit_code"], root["signal"], root["pid"]) == (8, 0, -6, 6, 1000)
    assert _fields(other)["root_cause"] == "false"
    assert _fields(root) == {
        "idx": "0",
        "host": "node-b",
        "time": "2023-06-14_22:36:10",
        "root_cause": "true",
        "error_file": "<N/A>",
        "traceback": "Signal 6 (SIGABRT) received by PID 1000",
    }
    # located at the entry's `rank      :` line
    assert lines[root["line"] - 1].startswith("  rank      : 8")
    assert root["raw"] == lines[root["line"] - 1]
    assert root["event_id"] == f"applog:0:{root['line']}:torchrun_failure"


def test_two_blocks_in_one_file_with_other_lines_between():
    a = _block("train.py", [], (0, 3, 3, 1, 500, "node-a", "To enable traceback see: https://pytorch.org/docs"))
    b = _block(
        "train.py",
        [(1, 12, 4, -6, 600, "node-b", "Signal 6 (SIGABRT) received by PID 600")],
        (0, 13, 5, -9, 601, "node-b", "Signal 9 (SIGKILL) received by PID 601"),
    )
    lines = ["iteration 10", *a, "srun: error: node-a: task 0: Exited with exit code 1", "noise", *b]
    rows = _run(assemble_torchrun_failures, _frame(lines)).to_dicts()
    got = [(r["rank"], r["exit_code"], _fields(r)["root_cause"], _fields(r)["host"]) for r in rows]
    assert got == [(3, 1, "true", "node-a"), (12, -6, "false", "node-b"), (13, -9, "true", "node-b")]


def test_blocks_of_two_nodes_interleaved_line_by_line_are_separated_by_node():
    a = _block("t.py", [(1, 1, 1, -15, 11, "node-a", "Signal 15")], (0, 0, 0, -6, 10, "node-a", "Signal 6"))
    b = _block("t.py", [(1, 9, 1, -15, 21, "node-b", "Signal 15")], (0, 8, 0, 1, 20, "node-b", "ValueError"))
    assert len(a) == len(b)
    lines = [x for pair in zip(a, b) for x in pair]
    nodes = ["node-a", "node-b"] * len(a)
    rows = _run(assemble_torchrun_failures, _frame(lines, node=nodes)).to_dicts()
    got = sorted((r["node"], r["rank"], _fields(r)["root_cause"], _fields(r)["host"]) for r in rows)
    assert got == [
        ("node-a", 0, "true", "node-a"),
        ("node-a", 1, "false", "node-a"),
        ("node-b", 8, "true", "node-b"),
        ("node-b", 9, "false", "node-b"),
    ]


def test_no_other_failures_yields_only_the_root_cause():
    lines = _block("train.py", [], (0, 0, 0, 1, 77, "h", "To enable traceback see: https://x"))
    rows = _run(assemble_torchrun_failures, _frame(lines)).to_dicts()
    assert [(r["rank"], _fields(r)["root_cause"]) for r in rows] == [(0, "true")]
    assert _run(assemble_torchrun_failures, _frame(["Failures:", "  <NO_OTHER_FAILURES>"])).height == 0


def test_quoted_error_file_traceback_gives_the_exception_line():
    lines = [
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-05-01_10:00:00",
        "  host      : node-a",
        "  rank      : 11 (local_rank: 3)",
        "  exitcode  : 1 (pid: 5003)",
        "  error_file: /tmp/torchelastic/3/error.json",
        "  traceback : Traceback (most recent call last):",
        '    File "/x/train.py", line 42, in main',
        "      raise ValueError('x')",
        "  torch.distributed.DistBackendError: NCCL communicator was aborted on rank 11.",
        "  ncclRemoteError: A call failed possibly due to a network error",
        "  ",
        "=" * 40,
    ]
    rows = _run(assemble_torchrun_failures, _frame(lines)).to_dicts()
    assert len(rows) == 1
    assert _fields(rows[0])["traceback"] == "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 11."
    assert rows[0]["signal"] is None


# ------------------------------------------------------------------------------------------ Last error


def test_last_error_takes_the_next_line_of_its_stream():
    lines = [
        "[rank3]: Last error:",
        "[rank2]: something else",
        "[rank3]: NET/OFI Request 0x1 completed with error. RC: 113. Error: 2 (UNDELIVERABLE)",
        "Last error:",
        "unrelated line without a trigger word",
    ]
    rows = _run(assemble_nccl_last_error, _frame(lines)).to_dicts()
    assert [(r["line"], r["rank"], _fields(r).get("text")) for r in rows] == [
        (1, 3, "NET/OFI Request 0x1 completed with error. RC: 113. Error: 2 (UNDELIVERABLE)"),
        (4, None, None),
    ]


# ------------------------------------------------------------------------------------------ empty input, engine


@pytest.mark.parametrize("asm", ASSEMBLERS, ids=lambda a: a.__name__)
def test_empty_input_gives_an_empty_frame_with_the_schema(asm):
    out = asm(pl.LazyFrame(schema=LINE_SCHEMA)).collect()
    assert out.height == 0
    assert out.schema == pl.Schema(EVENT_SCHEMA)


@pytest.mark.parametrize("asm", ASSEMBLERS, ids=lambda a: a.__name__)
def test_no_candidate_of_interest_gives_an_empty_frame(asm):
    out = asm(_frame(["hello", "world"]).lazy()).collect()
    assert out.height == 0
    assert out.schema == pl.Schema(EVENT_SCHEMA)


def test_engine_runs_the_assemblers_and_orders_events_by_line():
    lines = [*INTERLEAVED, *_block("t.py", [], (0, 0, 0, -6, 10, "n", "Signal 6"))]
    ev = extract_events(_frame(lines).lazy(), load_patterns()).collect()
    assert ev.schema == pl.Schema(EVENT_SCHEMA)
    kinds = ev.select("line", "kind").rows()
    assert (7, "python_exception") in kinds and (8, "python_exception") in kinds
    assert (10, "nccl_last_error") in kinds
    assert any(k == "torchrun_failure" for _, k in kinds)
    assert ev["line"].is_sorted()
    assert ev["event_id"].n_unique() == ev.height
