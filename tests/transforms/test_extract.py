"""Unit tests of the line-pattern engine (transforms/extract.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstfault.transforms.extract import (
    EVENT_SCHEMA,
    LINE_SCHEMA,
    Pattern,
    PatternError,
    check_regexes,
    events_from_text,
    extract_events,
    lines_frame,
    load_patterns,
    normalize_gpu,
    trigger_literals,
)

DESIGN_COLUMNS = (
    "attempt_id event_id kind code code_text severity node rank local_rank gpu ts ts_quality message peer_addr "
    "peer_node device port link pg seq op_type numel_in numel_out timeout_ms ran_for_ms last_enqueued "
    "last_completed exit_code signal pid iteration fields source uri line locator raw"
).split()


def P(kind, regex, triggers=("T",), group=None, sources=None, **consts) -> Pattern:
    return Pattern(kind=kind, group=group or kind, triggers=tuple(triggers), regex=regex, sources=sources, constants=consts)


def run(lines, patterns, source="applog", **kw) -> pl.DataFrame:
    return extract_events(lines_frame(lines, source, **kw).lazy(), patterns, assemblers=[], multiline_triggers=[]).collect()


def fields(df: pl.DataFrame, i: int = 0) -> dict:
    return json.loads(df["fields"][i])


# ------------------------------------------------------------------------------------------------ schema


def test_event_schema_matches_design_order_and_types():
    assert list(EVENT_SCHEMA) == DESIGN_COLUMNS
    assert EVENT_SCHEMA["code"] == pl.Int64 and EVENT_SCHEMA["rank"] == pl.Int32
    assert EVENT_SCHEMA["ts"] == pl.Datetime("us") and EVENT_SCHEMA["line"] == pl.Int64
    assert EVENT_SCHEMA["exit_code"] == pl.Int32 and EVENT_SCHEMA["signal"] == pl.Int32
    assert EVENT_SCHEMA["fields"] == pl.String and EVENT_SCHEMA["locator"] == pl.String


@pytest.mark.parametrize(
    "lines",
    [[], ["nothing to see here"], ["T but the regex fails"]],
    ids=["no-lines", "no-trigger", "trigger-no-match"],
)
def test_schema_exact_with_zero_events(lines):
    pats = [P("k", r"T (?P<code>\d+)")]
    lf = extract_events(lines_frame(lines).lazy(), pats, assemblers=[], multiline_triggers=[])
    assert isinstance(lf, pl.LazyFrame)
    assert lf.collect_schema() == pl.Schema(EVENT_SCHEMA)
    df = lf.collect()
    assert df.height == 0
    assert df.schema == pl.Schema(EVENT_SCHEMA)


def test_schema_exact_without_patterns_and_with_default_patterns():
    df = extract_events(lines_frame(["x"]).lazy(), [], assemblers=[], multiline_triggers=[]).collect()
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    df = events_from_text(["NVRM: Xid (PCI:0000:cb:00): 13, pid=1, name=x, y", "noise"], "syslog")
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    assert df["kind"].to_list() == ["xid"]


def test_schema_exact_with_events():
    df = run(["T 7"], [P("k", r"T (?P<code>\d+)")])
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    assert df.height == 1


# ------------------------------------------------------------------------------------------------ groups


def test_group_first_match_wins():
    pats = [
        P("specific", r"T (?P<code>\d+) special", group="g"),
        P("generic", r"T (?P<code>\d+)", group="g"),
    ]
    df = run(["T 1 special", "T 2 plain"], pats)
    assert df.select("kind", "code").rows() == [("specific", 1), ("generic", 2)]


def test_group_order_is_file_order_not_specificity():
    pats = [
        P("generic", r"T (?P<code>\d+)", group="g"),
        P("specific", r"T (?P<code>\d+) special", group="g"),
    ]
    df = run(["T 1 special"], pats)
    assert df["kind"].to_list() == ["generic"]


def test_different_groups_both_fire_and_are_ordered_by_line_then_pattern():
    pats = [P("b", r"T (?P<code>\d+)"), P("a", r"T \d+ (?P<x>\w+)")]
    df = run(["T 1 foo", "zzz", "T 2 bar"], pats)
    assert df.select("kind", "line").rows() == [("b", 1), ("a", 1), ("b", 3), ("a", 3)]
    assert df["event_id"].to_list() == ["applog:0:1:b", "applog:0:1:a", "applog:0:3:b", "applog:0:3:a"]


def test_group_earlier_pattern_with_other_trigger_does_not_block():
    # the earlier pattern of the group needs trigger "U": a line without "U" falls through to the later one
    pats = [P("u", r"T", triggers=("U",), group="g"), P("t", r"T", triggers=("T",), group="g")]
    df = run(["T only", "T and U"], pats)
    assert df.select("kind", "line").rows() == [("t", 1), ("u", 2)]


def test_same_event_id_kept_once():
    pats = [P("k", r"T (?P<code>\d+)", group="g1"), P("k", r"T (?P<pid>\d+)", group="g2")]
    df = run(["T 5"], pats)
    assert df.height == 1 and df["code"][0] == 5 and df["pid"][0] is None


# ------------------------------------------------------------------------------------------------ prefilter


def test_prefilter_skips_lines_without_trigger():
    # the regex matches every line, but only lines holding the literal trigger are tested
    df = run(["abc", "has XYZ inside", "xyz lower"], [P("k", r".*", triggers=("XYZ",))])
    assert df["line"].to_list() == [2]


def test_trigger_is_case_sensitive_literal_not_regex():
    df = run(["a.b", "axb"], [P("k", r"a", triggers=("a.b",))])
    assert df["line"].to_list() == [1]


def test_sources_restriction():
    pats = [P("k", r"T", sources=("syslog",))]
    assert run(["T"], pats, source="syslog").height == 1
    assert run(["T"], pats, source="applog").height == 0


def test_trigger_literals_deduplicated_sorted():
    pats = [P("a", "x", triggers=("b", "a")), P("c", "x", triggers=("a", "c"))]
    assert trigger_literals(pats) == ["a", "b", "c"]


def test_multiline_triggers_reach_assemblers_and_outputs_are_conformed():
    seen = {}

    def asm(cand: pl.LazyFrame) -> pl.LazyFrame:
        df = cand.collect()
        seen["msgs"] = df["msg"].to_list()
        return df.lazy().filter(pl.col("msg").str.contains("MULTI")).select(
            pl.col("attempt_id"),
            pl.concat_str([pl.col("source"), pl.col("file_index"), pl.col("line"), pl.lit("blob")], separator=":").alias(
                "event_id"
            ),
            pl.lit("blob").alias("kind"),
            pl.col("source"),
            pl.col("line"),
            pl.lit("12").alias("code"),  # wrong dtype on purpose: conformed to Int64
        )

    lf = lines_frame(["T 1", "MULTI start", "noise", "T 2"]).lazy()
    df = extract_events(lf, [P("k", r"T (?P<code>\d+)")], assemblers=[asm], multiline_triggers=["MULTI"]).collect()
    assert seen["msgs"] == ["T 1", "MULTI start", "T 2"]
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    assert df.select("kind", "line", "code").rows() == [("k", 1, 1), ("blob", 2, 12), ("k", 4, 2)]


# ------------------------------------------------------------------------------------------------ casting


def test_int_casting_and_failures_become_null():
    pats = [P("k", r"T (?P<code>\S+) (?P<pid>\S+) (?P<exit_code>\S+) (?P<port>\S+)")]
    df = run(["T 42 0x1f -9 notanumber", "T '<unknown>' 99999999999 2 7"], pats)
    assert df.select("code", "pid", "exit_code", "signal", "port").rows() == [
        (42, 31, -9, 9, None),
        (None, 99999999999, 2, None, 7),
    ]
    assert df.schema["port"] == pl.Int32 and df.schema["exit_code"] == pl.Int32


def test_signal_not_overwritten_when_captured():
    df = run(["T -6 11"], [P("k", r"T (?P<exit_code>-?\d+) (?P<signal>\d+)")])
    assert df.select("exit_code", "signal").row(0) == (-6, 11)


def test_empty_capture_is_null():
    df = run(["T name= pid="], [P("k", r"T name=(?P<name>\S*) pid=(?P<pid>\S*)")])
    assert df["pid"][0] is None
    assert fields(df) == {}


def test_constants_fill_columns_and_fields_but_captures_win():
    pats = [
        P("k", r"T(?: (?P<severity>\w+))?", severity="warning", code=7, **{"fields.tag": "x", "other": 3}),
    ]
    df = run(["T", "T Fatal"], pats)
    assert df["severity"].to_list() == ["warning", "fatal"]
    assert df["code"].to_list() == [7, 7]
    assert fields(df) == {"other": "3", "tag": "x"}


def test_suffix_groups_coalesce_into_one_target():
    pats = [P("k", r"T (?:a=(?P<code>\d+)|b=(?P<code__b>\d+)) (?:(?P<job>\d+)|j(?P<job__2>\d+))")]
    df = run(["T a=1 5", "T b=2 j6"], pats)
    assert df["code"].to_list() == [1, 2]
    assert [json.loads(x)["job"] for x in df["fields"]] == ["5", "6"]


def test_line_columns_pass_through_and_captures_override_node_rank():
    lf = lines_frame(["T x", "T y r=3 n=peer"], "syslog", node="gpu-001").with_columns(
        pl.lit(5, dtype=pl.Int32).alias("rank"),
        pl.lit(1, dtype=pl.Int32).alias("local_rank"),
        pl.lit("2024-01-01T00:00:00").str.to_datetime(time_unit="us").alias("ts"),
        pl.lit("exact").alias("ts_quality"),
        pl.lit(3, dtype=pl.Int32).alias("file_index"),
        pl.col("raw").str.replace("^", "<13>").alias("raw"),
    )
    pats = [P("k", r"T \w(?: r=(?P<rank>\d+) n=(?P<node>\S+))?")]
    df = extract_events(lf.lazy(), pats, assemblers=[], multiline_triggers=[]).collect()
    assert df.select("node", "rank", "local_rank").rows() == [("gpu-001", 5, 1), ("peer", 3, 1)]
    assert df["ts_quality"].to_list() == ["exact", "exact"]
    assert df["ts"][0].year == 2024
    assert df["event_id"].to_list() == ["syslog:3:1:k", "syslog:3:2:k"]
    assert df["message"].to_list() == ["T x", "T y r=3 n=peer"]
    assert df["raw"][0] == "<13>T x"
    assert df["uri"][0] == "mem://test" and df["attempt_id"][0] == "test/t/0"
    assert df["locator"][0] is None


def test_raw_truncated_to_4096():
    line = "T " + "x" * 10000
    df = run([line], [P("k", r"T")])
    assert len(df["raw"][0]) == 4096
    assert len(df["message"][0]) == len(line)


# ------------------------------------------------------------------------------------------------ fields JSON


def test_fields_json_sorted_strings_nulls_dropped_and_escaped():
    pats = [P("k", r'T (?P<zeta>\S+) (?P<alpha>"[^"]*\\) ?(?P<opt>Q)?')]
    df = run(['T 12 "a\\'], pats)
    raw = df["fields"][0]
    assert raw == '{"alpha":"\\"a\\\\","zeta":"12"}'
    assert json.loads(raw) == {"alpha": '"a\\', "zeta": "12"}


def test_fields_empty_object_when_no_extra_groups():
    df = run(["T 1"], [P("k", r"T (?P<code>\d+)")])
    assert df["fields"][0] == "{}"


def test_pci_fields_normalised():
    df = run(["T 00000000:86:00.0 0000:0A:00.1"], [P("k", r"T (?P<switch_pci>\S+) (?P<pci>\S+)")])
    assert fields(df) == {"pci": "0000:0a:00.1", "switch_pci": "0000:86:00.0"}


# ------------------------------------------------------------------------------------------------ normalisation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0000:61:00", "0000:61:00"),
        ("0000:61:00.0", "0000:61:00"),
        ("00000000:61:00.0", "0000:61:00"),
        ("0000:CB:00", "0000:cb:00"),
        ("0019:01:00", "0019:01:00"),
        ("61:00.0", "0000:61:00"),
        ("...", None),
        ("<id>", None),
    ],
)
def test_gpu_normalisation(text, expected):
    df = run([f"T {text}"], [P("k", r"T (?P<gpu>\S+)")])
    assert df["gpu"][0] == expected


@pytest.mark.parametrize(
    ("busid", "expected"),
    [("61000", "0000:61:00"), ("1b000", "0000:1b:00"), ("0x1b000", "0000:1b:00"), ("1901000", "0019:01:00"), ("zz", None)],
)
def test_gpu_from_nccl_busid(busid, expected):
    df = run([f"T busId {busid}"], [P("k", r"T busId (?P<busid>\S+)")])
    assert df["gpu"][0] == expected


def test_normalize_gpu_expr_directly():
    s = pl.DataFrame({"g": ["0000:61:00.0", None], "b": [None, "db000"]})
    out = s.select(normalize_gpu(pl.col("g"), pl.col("b")).alias("x"))["x"].to_list()
    assert out == ["0000:61:00", "0000:db:00"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fatal", "fatal"),
        ("Non-fatal", "nonfatal"),
        ("Nonfatal", "nonfatal"),
        ("non-fatal", "nonfatal"),
        ("Uncorrected (Fatal)", "fatal"),
        ("Uncorrectable (Non-Fatal)", "nonfatal"),
        ("Corrected", "correctable"),
        ("Correctable", "correctable"),
        ("ERROR", "error"),
        ("WARN", "warning"),
        ("info", "info"),
    ],
)
def test_severity_normalisation(text, expected):
    df = run([f"T {text}|"], [P("k", r"T (?P<severity>[^|]+)\|")])
    assert df["severity"][0] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0000:5E:00.0", "0000:5e:00.0"), ("00000000:5e:00.1", "0000:5e:00.1"), ("mlx5_0", "mlx5_0"), ("ib0", "ib0")],
)
def test_device_normalisation(text, expected):
    df = run([f"T {text}"], [P("k", r"T (?P<device>\S+)")])
    assert df["device"][0] == expected


# ------------------------------------------------------------------------------------------------ robustness


GARBAGE = [
    "",
    " ",
    "\x00\x01\x02",
    "NVRM: Xid",
    "NVRM: Xid (",
    "NVRM: Xid (PCI:",
    "NVRM: Xid (PCI:zzzz:qq:rr): notanumber, pid=",
    "NVRM: Xid (PCI:0000:01:00): 99999999999999999999999, pid=99999999999999999999999",
    "SXid (" * 100,
    "srun: error: : tasks : Exited with exit code ",
    "*** JOB  ON  CANCELLED AT  ***",
    "\ufffd\ufffd NCCL WARN \ud7ff",
    "Out of memory: Killed process (",
    "x" * 70000 + " NVRM: Xid (PCI:0000:01:00): 13, y",
    "pcieport 0000:00:03.0:    [ 5]",
    "EDAC MC: UE",
    "oom-kill:constraint=",
]


def test_garbage_lines_never_raise():
    df = events_from_text(GARBAGE, "syslog")
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    df = events_from_text(GARBAGE, "applog")
    assert df.schema == pl.Schema(EVENT_SCHEMA)


def test_null_msg_and_missing_line_columns_are_tolerated():
    lf = pl.DataFrame(
        {"msg": [None, "T 1"], "raw": [None, "T 1"], "line": [1, 2], "source": ["applog", "applog"]},
        schema_overrides={"line": pl.Int64},
    ).lazy()
    df = extract_events(lf, [P("k", r"T (?P<code>\d+)")], assemblers=[], multiline_triggers=[]).collect()
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    assert df["code"].to_list() == [1]


_TRIGGER_WORDS = sorted(set(trigger_literals(load_patterns())))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=200),
            st.builds(
                lambda a, t, b: a + t + b,
                st.text(max_size=40),
                st.sampled_from(_TRIGGER_WORDS),
                st.text(alphabet=st.characters(codec="utf-8"), max_size=80),
            ),
        ),
        max_size=12,
    )
)
def test_fuzz_default_patterns_never_raise(lines):
    df = events_from_text(lines, "syslog")
    assert df.schema == pl.Schema(EVENT_SCHEMA)
    assert df["line"].is_between(1, max(len(lines), 1)).all()


# ------------------------------------------------------------------------------------------------ loading


def _write(dir_: Path, name: str, text: str) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    p = dir_ / name
    p.write_text(text, encoding="utf-8")
    return p


def test_load_patterns_builtin_files_then_extra_dirs_sorted(tmp_path):
    builtin = load_patterns()
    assert builtin, "transforms/patterns/*.yaml must hold patterns"
    kinds = {p.kind for p in builtin}
    assert {"xid", "sxid", "slurm_cancel", "slurm_task_exit", "pcie_aer", "host_oom"} <= kinds
    _write(tmp_path, "b.yaml", "- {kind: second, trigger: [B], regex: 'B'}\n")
    _write(tmp_path, "a.yaml", "- {kind: first, trigger: A, regex: 'A', set: {severity: info, fields: {x: 1}}}\n")
    _write(tmp_path, "ignored.txt", "not yaml patterns")
    pats = load_patterns([tmp_path])
    assert pats[: len(builtin)] == builtin
    assert [p.kind for p in pats[len(builtin) :]] == ["first", "second"]
    first = pats[len(builtin)]
    assert first.triggers == ("A",) and first.group == "first" and first.sources is None
    assert first.constants == {"severity": "info", "fields.x": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {kind: k, trigger: [T], regex: '(unclosed'}\n", "invalid regex"),
        ("- {kind: k, trigger: [], regex: 'T'}\n", "trigger"),
        ("- {kind: k, regex: 'T'}\n", "trigger"),
        ("- {trigger: [T], regex: 'T'}\n", "kind"),
        ("- {kind: k, trigger: [T]}\n", "regex"),
        ("- {kind: k, trigger: [T], regex: 'T', colour: red}\n", "unknown key"),
        ("- {kind: k, trigger: [T], regex: '(?P<line>T)'}\n", "reserved"),
        ("- {kind: k, trigger: [T], regex: 'T', set: {kind: other}}\n", "may not set"),
        ("kind: k\n", "YAML list"),
    ],
)
def test_load_patterns_rejects_malformed_entries(tmp_path, text, message):
    _write(tmp_path, "bad.yaml", text)
    with pytest.raises(PatternError, match=message):
        load_patterns([tmp_path])


def test_builtin_pattern_regexes_have_named_groups_only_for_known_targets():
    for p in load_patterns():
        assert p.triggers and all(p.triggers), p.origin
        assert p.kind and p.group, p.origin


def test_line_schema_is_what_lines_frame_builds():
    assert lines_frame(["a"]).schema == pl.Schema(LINE_SCHEMA)


def test_builtin_pattern_regexes_compile():
    """Landing does not compile the built-in regexes up front (load_pattern_file): this test does."""
    check_regexes(load_patterns())
