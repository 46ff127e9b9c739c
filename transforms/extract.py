"""Line-pattern event extraction (DESIGN.md §3).

Patterns live in ``transforms/patterns/*.yaml`` (one YAML list per family). Each entry::

    - kind: xid                  # event kind (required)
      group: xid                 # optional, default = kind; within a group only the FIRST pattern
                                 # (load order) that matches a line yields an event
      trigger: ["NVRM: Xid"]     # literal strings (required); only lines containing one are tested
      regex: 'NVRM: Xid \\(...'   # Rust regex (polars); named groups
      sources: [syslog]          # optional restriction on the line's source
      set: {severity: fatal}     # optional constants (schema columns or fields.<key> / other keys -> fields)

Named groups:

* a group named like a capturable schema column (``code``, ``gpu``, ``pid``, ``exit_code``, …) fills that
  column (integers are parsed, ``0x`` hex accepted; failures become null);
* ``busid`` (NCCL ``busId 61000``) fills ``gpu``;
* ``<name>__<suffix>`` (e.g. ``gpu__1``, ``gpu__2``) lets several alternatives of one regex fill the same target:
  the first non-null wins (Rust regex forbids duplicate group names);
* every other group goes into ``fields`` (JSON object, keys sorted, values strings, nulls dropped); fields named
  ``pci``, ``source_id`` or ``*_pci`` are PCI addresses and normalised like ``device``.

Post-processing: ``gpu`` -> ``dddd:bb:dd`` lower case; ``device`` that looks like a BDF -> ``dddd:bb:dd.f`` lower
case; ``severity`` lower-cased onto ``fatal|nonfatal|correctable|error|warning|info`` (a `set` may
also give ``advisory``: a request the device refused); ``signal`` = −exit_code for
negative exit codes; ``node``/``rank``/``local_rank`` from the line unless captured; ``message`` = msg; ``raw``
truncated to 4096 chars; ``event_id`` = ``source:file_index:line:kind`` (the first event per id is kept).

Constants from ``set`` apply where the regex left the column null. Empty captures count as null.

Execution is columnar: one Aho–Corasick prefilter (``str.contains_any`` over every trigger, including
``multiline.MULTILINE_TRIGGERS``) over the whole ``msg`` column selects the candidate lines (a handful per thousand in
real logs). The candidates go, as ONE frame, through a ``map_batches`` node that works eagerly on that small frame:
one ``select`` computes every pattern's trigger hits, then only patterns whose triggers occur run their regex (on
their trigger rows only) and ``str.extract_groups``; the per-pattern captures are concatenated and projected into
:data:`EVENT_SCHEMA` once, and the multi-line assemblers' outputs are appended. No per-line Python anywhere.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import polars as pl
import yaml
from firstfault.transforms.multiline import (
    ASSEMBLERS,
    MULTILINE_TRIGGERS,
    or_entry_header,
)

from firstfault import yamlio
from firstfault.schema import EVENT_SCHEMA, LINE_SCHEMA, RAW_MAX, conform_events

__all__ = [
    "Pattern",
    "PatternError",
    "load_patterns",
    "trigger_literals",
    "extract_events",
    "events_from_text",
    "empty_events",
    "lines_frame",
    "load_pattern_file",
    "normalize_gpu",
    "normalize_device",
    "normalize_severity",
    "PATTERNS_DIR",
]

PATTERNS_DIR = Path(__file__).resolve().parent / "patterns"

#: schema columns that a named group (or a `set` constant) may fill
CAPTURABLE: frozenset[str] = frozenset(EVENT_SCHEMA) - {
    "attempt_id",
    "event_id",
    "kind",
    "ts",
    "ts_quality",
    "message",
    "fields",
    "source",
    "uri",
    "line",
    "locator",
    "raw",
}
#: group names that may not be used at all (they would silently shadow line data)
RESERVED_GROUPS: frozenset[str] = frozenset(EVENT_SCHEMA) - CAPTURABLE

_INT_TYPES = (pl.Int64, pl.Int32)
_GROUP_NAME_RE = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")
_SUFFIX_RE = re.compile(r"^(.*?)__\w+$")
_PATTERN_KEYS = {"kind", "group", "trigger", "triggers", "regex", "sources", "set"}


class PatternError(ValueError):
    """A pattern file entry is malformed."""


@dataclass(frozen=True)
class Pattern:
    kind: str
    group: str
    triggers: tuple[str, ...]
    regex: str
    sources: tuple[str, ...] | None = None
    constants: dict = field(default_factory=dict, hash=False)
    origin: str = field(default="", compare=False, hash=False)

    @property
    def group_names(self) -> list[str]:
        return _GROUP_NAME_RE.findall(self.regex)


# --------------------------------------------------------------------------------------------- loading


def _target(name: str) -> str:
    """Column (or fields key) a group/constant name feeds."""
    m = _SUFFIX_RE.match(name)
    base = m.group(1) if m else name
    if base == "busid":
        return "gpu"
    return base


def _regex_checks(regex: str) -> list[pl.Expr]:
    """What extraction will run of the regex: contains, and extract_groups when it names groups."""
    m = pl.lit("x", dtype=pl.String)
    checks = [m.str.contains(regex)]
    if _GROUP_NAME_RE.search(regex):
        checks.append(m.str.extract_groups(regex))
    return checks


def check_regexes(patterns: Sequence[Pattern]) -> None:
    """PatternError naming the first pattern whose regex polars cannot compile."""
    for p in patterns:
        try:
            pl.select([e.alias(f"c{j}") for j, e in enumerate(_regex_checks(p.regex))])
        except Exception as exc:  # noqa: BLE001 - polars raises ComputeError for a bad regex
            raise PatternError(f"{p.origin}: invalid regex: {exc}") from exc


def _parse_entry(entry: Any, where: str) -> Pattern:
    if not isinstance(entry, dict):
        raise PatternError(f"{where}: pattern must be a mapping, got {type(entry).__name__}")
    unknown = set(entry) - _PATTERN_KEYS
    if unknown:
        raise PatternError(f"{where}: unknown key(s) {sorted(unknown)}")
    kind = entry.get("kind")
    if not isinstance(kind, str) or not kind:
        raise PatternError(f"{where}: 'kind' is required")
    regex = entry.get("regex")
    if not isinstance(regex, str) or not regex:
        raise PatternError(f"{where}: 'regex' is required")
    trig = entry.get("trigger", entry.get("triggers"))
    if isinstance(trig, str):
        trig = [trig]
    if not trig or not all(isinstance(t, str) and t for t in trig):
        raise PatternError(f"{where}: 'trigger' must be a non-empty list of non-empty strings")
    sources = entry.get("sources")
    if sources is not None:
        if isinstance(sources, str):
            sources = [sources]
        sources = tuple(str(s) for s in sources)
    consts = entry.get("set") or {}
    if not isinstance(consts, dict):
        raise PatternError(f"{where}: 'set' must be a mapping")
    flat: dict[str, Any] = {}
    for k, v in consts.items():
        if k == "fields" and isinstance(v, dict):
            for fk, fv in v.items():
                flat[f"fields.{fk}"] = fv
        elif k in RESERVED_GROUPS:
            raise PatternError(f"{where}: 'set' may not set {k!r}")
        else:
            flat[str(k)] = v
    for g in _GROUP_NAME_RE.findall(regex):
        if _target(g) in RESERVED_GROUPS:
            raise PatternError(f"{where}: group name {g!r} is reserved (line data)")
    group = entry.get("group") or kind
    return Pattern(
        kind=kind,
        group=str(group),
        triggers=tuple(trig),
        regex=regex,
        sources=sources,
        constants=flat,
        origin=where,
    )


def load_pattern_file(path: Path, *, check: bool = True) -> list[Pattern]:
    """The patterns of one file; `check` compiles their regexes first (a site's files: a typo is exit 2 before any
    landing). The built-in files are checked by the test suite instead: compiling their ~170 regexes costs ~0.4 s,
    most of a small attempt's run, and extraction compiles only those whose triggers occur."""
    stat = Path(path).stat()
    return list(_load_pattern_file(str(path), stat.st_mtime_ns, stat.st_size, check))


@functools.lru_cache(maxsize=256)
def _load_pattern_file(path: str, mtime_ns: int, size: int, check: bool) -> tuple[Pattern, ...]:
    """Parsed (and checked) once per process and file version: a nightly shard lands attempts one by one."""
    try:
        data = yamlio.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise PatternError(f"{path}: {yamlio.describe_error(e)}") from None
    if data is None:
        return ()
    if not isinstance(data, list):
        raise PatternError(f"{path}: a pattern file is a YAML list")
    patterns = tuple(_parse_entry(e, f"{Path(path).name}[{i}]") for i, e in enumerate(data))
    if check:
        check_regexes(patterns)
    return patterns



def load_patterns(extra_dirs: Sequence[Path] = ()) -> list[Pattern]:
    """All ``transforms/patterns/*.yaml`` (sorted by file name), then ``*.yaml`` of each extra dir."""
    out: list[Pattern] = []
    for d in (PATTERNS_DIR, *map(Path, extra_dirs)):
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.yaml"), key=lambda p: p.name):
            out.extend(load_pattern_file(p, check=d != PATTERNS_DIR))
    return out


def trigger_literals(patterns: Sequence[Pattern]) -> list[str]:
    """The distinct trigger strings of all patterns (sorted)."""
    return sorted({t for p in patterns for t in p.triggers})


# --------------------------------------------------------------------------------------------- helpers


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_SCHEMA)


def _parse_int(e: pl.Expr) -> pl.Expr:
    s = e.str.strip_chars()
    hexv = s.str.strip_prefix("0x").str.strip_prefix("0X")
    return (
        pl.when(s.str.starts_with("0x") | s.str.starts_with("0X"))
        .then(hexv.str.to_integer(base=16, strict=False))
        .otherwise(s.str.to_integer(base=10, strict=False))
    )


_BDF_RE = r"^(?:(?P<d>[0-9a-fA-F]{1,8}):)?(?P<b>[0-9a-fA-F]{2}):(?P<v>[0-9a-fA-F]{2})(?:\.(?P<f>[0-7]))?$"


def normalize_gpu(e: pl.Expr, busid: pl.Expr | None = None) -> pl.Expr:
    """`0000:61:00`, `0000:61:00.0`, `00000000:61:00.0` -> `0000:61:00`; NCCL busId `61000` -> `0000:61:00`."""
    g = e.str.strip_chars().str.extract_groups(_BDF_RE)
    dom = g.struct.field("d").fill_null("0").str.zfill(4).str.slice(-4, 4)
    bdf = pl.concat_str([dom, g.struct.field("b"), g.struct.field("v")], separator=":").str.to_lowercase()
    if busid is None:
        return bdf
    b = busid.str.strip_chars().str.strip_prefix("0x")
    b = pl.when(b.str.contains(r"^[0-9a-fA-F]{1,13}$")).then(b.str.zfill(9))
    from_bus = pl.concat_str(
        [b.str.slice(-9, 4), b.str.slice(-5, 2), b.str.slice(-3, 2)], separator=":"
    ).str.to_lowercase()
    return pl.coalesce(bdf, from_bus)


def normalize_device(e: pl.Expr) -> pl.Expr:
    """A PCI BDF device keeps its function but gets a 4-digit lower-case domain; names are kept as printed."""
    g = e.str.extract_groups(_BDF_RE)
    dom = g.struct.field("d").fill_null("0").str.zfill(4).str.slice(-4, 4)
    bdf = pl.concat_str(
        [
            pl.concat_str([dom, g.struct.field("b"), g.struct.field("v")], separator=":"),
            pl.concat_str([pl.lit("."), g.struct.field("f")]),
        ],
        ignore_nulls=True,
    ).str.to_lowercase()
    return pl.when(e.str.contains(_BDF_RE)).then(bdf).otherwise(e)


def normalize_severity(e: pl.Expr) -> pl.Expr:
    s = e.str.strip_chars().str.to_lowercase()
    return (
        pl.when(s.str.contains(r"non[- _]?fatal"))
        .then(pl.lit("nonfatal"))
        .when(s.str.contains("fatal"))
        .then(pl.lit("fatal"))
        .when(s.str.contains(r"^correct"))
        .then(pl.lit("correctable"))
        .when(s.is_in(["err", "error", "e"]))
        .then(pl.lit("error"))
        .when(s.is_in(["warn", "warning", "w"]))
        .then(pl.lit("warning"))
        .when(s.is_in(["information", "informational", "i", "notice"]))
        .then(pl.lit("info"))
        .otherwise(s)
    )


def _json_member(key: str, value: pl.Expr) -> pl.Expr:
    # struct.json_encode gives {"key":"value"}; drop the braces to keep one member
    return pl.when(value.is_not_null()).then(
        pl.struct(value.alias(key)).struct.json_encode().str.slice(1).str.head(-1)
    )


def _fields_json(members: dict[str, pl.Expr]) -> pl.Expr:
    if not members:
        return pl.lit("{}")
    parts = [_json_member(k, members[k]) for k in sorted(members)]
    body = pl.concat_str(parts, separator=",", ignore_nulls=True)
    return pl.concat_str([pl.lit("{"), body.fill_null(""), pl.lit("}")])


def _const_lit(value: Any, dtype: pl.DataType) -> pl.Expr:
    if value is None:
        return pl.lit(None, dtype=dtype)
    if isinstance(dtype, _INT_TYPES):
        return pl.lit(int(value), dtype=dtype)
    return pl.lit(str(value), dtype=pl.String)


#: fields holding a PCI address, normalised like `device` (4-digit lower-case domain, function kept)
_PCI_FIELDS = frozenset({"pci", "source_id"})

_LINE_PASS = ("attempt_id", "source", "uri", "line", "ts", "ts_quality")


def _group(name: str) -> pl.Expr:
    """A named group of the ``__g`` captures; an empty capture is null."""
    e = pl.col("__g").struct.field(name)
    return pl.when(e.str.len_chars() > 0).then(e)


def _groups_by_target(pat: Pattern) -> dict[str, list[str]]:
    by_target: dict[str, list[str]] = {}
    for g in pat.group_names:
        by_target.setdefault(_target(g), []).append(g)
    return by_target


def _captured(names: list[str], dtype: pl.DataType) -> pl.Expr:
    """A capturable column from its groups: the first non-null, integers parsed."""
    e = pl.coalesce([_group(n) for n in names]) if len(names) > 1 else _group(names[0])
    return _parse_int(e).cast(dtype, strict=False) if isinstance(dtype, _INT_TYPES) else e.cast(pl.String)


def _pattern_narrow(rows: pl.DataFrame, pat: Pattern, prio: int) -> pl.DataFrame:
    """Captures of one pattern on the rows it owns: ``__row``, ``__prio``, ``kind``, ``c_<col>``, ``__gpu``,
    ``__busid``, ``fields``. Column naming keeps the line's own node/rank apart from captured ones."""
    if pat.group_names:
        rows = rows.with_columns(pl.col("msg").str.extract_groups(pat.regex).alias("__g"))
    grp = _group
    by_target = _groups_by_target(pat)

    cols: dict[str, pl.Expr] = {}
    field_members: dict[str, pl.Expr] = {}
    for tgt, names in by_target.items():
        if tgt == "gpu":
            plain = [grp(n) for n in names if not n.startswith("busid")]
            bus = [grp(n) for n in names if n.startswith("busid")]
            if plain:
                cols["__gpu"] = pl.coalesce(plain) if len(plain) > 1 else plain[0]
            if bus:
                cols["__busid"] = pl.coalesce(bus) if len(bus) > 1 else bus[0]
            continue
        e = pl.coalesce([grp(n) for n in names]) if len(names) > 1 else grp(names[0])
        if tgt in CAPTURABLE:
            cols[f"c_{tgt}"] = _captured(names, EVENT_SCHEMA[tgt])
        elif tgt in _PCI_FIELDS or tgt.endswith("_pci"):
            field_members[tgt] = normalize_device(e)
        else:
            field_members[tgt] = e

    for k, v in pat.constants.items():
        if k.startswith("fields.") or k not in CAPTURABLE:
            k2 = k[len("fields."):] if k.startswith("fields.") else k
            lit = pl.lit(None, dtype=pl.String) if v is None else pl.lit(str(v))
            field_members[k2] = pl.coalesce(field_members[k2], lit) if k2 in field_members else lit
        elif k == "gpu":
            lit = pl.lit(None if v is None else str(v), dtype=pl.String)
            cols["__gpu"] = pl.coalesce(cols["__gpu"], lit) if "__gpu" in cols else lit
        else:
            dtype = EVENT_SCHEMA[k]
            lit = _const_lit(v, dtype).cast(dtype if isinstance(dtype, _INT_TYPES) else pl.String)
            cols[f"c_{k}"] = pl.coalesce(cols[f"c_{k}"], lit) if f"c_{k}" in cols else lit

    return rows.select(
        pl.col("__row"),
        pl.lit(prio, dtype=pl.Int32).alias("__prio"),
        pl.lit(pat.kind, dtype=pl.String).alias("kind"),
        *[e.alias(c) for c, e in cols.items()],
        _fields_json(field_members).alias("fields"),
    )


def first_match(lines: pl.DataFrame, patterns: Sequence[Pattern], target: str) -> pl.DataFrame:
    """The lines that one of `patterns` matches, in their order, with the column `target` as the first pattern that
    matches (load order) captures or sets it: what extract_events gives the events of these patterns, one column
    wide. The progress summary reads the iterations of a million markers this way without building their events."""
    dtype = EVENT_SCHEMA[target]
    rows, msg = lines.with_row_index("__row"), pl.col("msg")
    parts: list[pl.DataFrame] = []
    taken: pl.Series | None = None
    for pat in patterns:
        cond = msg.str.contains_any(list(pat.triggers)).fill_null(False)
        if pat.sources is not None:
            cond = cond & pl.col("source").is_in(list(pat.sources)).fill_null(False)
        if taken is not None:
            cond = cond & ~pl.col("__row").is_in(taken.implode())
        hit = rows.filter(cond).filter(msg.str.contains(pat.regex).fill_null(False))
        if not hit.height:
            continue
        names = _groups_by_target(pat).get(target)
        value = _captured(names, dtype) if names else pl.lit(None, dtype)
        if target in pat.constants:
            value = pl.coalesce(value, _const_lit(pat.constants[target], dtype).cast(dtype))
        if names:
            hit = hit.with_columns(msg.str.extract_groups(pat.regex).alias("__g"))
        parts.append(hit.with_columns(value.cast(dtype).alias(target)).drop("__g", strict=False))
        taken = hit["__row"] if taken is None else pl.concat([taken, hit["__row"]])
    if not parts:
        return lines.clear().with_columns(pl.lit(None, dtype).alias(target))
    return pl.concat(parts).sort("__row").drop("__row")


def _extract_df(
    cand: pl.DataFrame,
    patterns: Sequence[Pattern],
    assemblers: Sequence[Callable[[pl.LazyFrame], pl.LazyFrame]],
) -> pl.DataFrame:
    """Eager core over the (few) candidate lines."""
    cand = cand.with_row_index("__row")
    parts: list[pl.DataFrame] = []

    # patterns grouped in order of first appearance; within a group the first matching pattern wins
    groups: dict[str, list[tuple[int, Pattern]]] = {}
    for i, pat in enumerate(patterns):
        groups.setdefault(pat.group, []).append((i, pat))

    msg = pl.col("msg")
    # one pass over the candidates: which rows hold which pattern's triggers (trigger sets deduplicated)
    tkeys: dict[tuple[str, ...], str] = {}
    for pat in patterns:
        tkeys.setdefault(tuple(sorted(set(pat.triggers))), f"__t{len(tkeys)}")
    hits = cand.select(
        pl.col("__row"),
        pl.col("source"),
        pl.col("msg"),
        *[msg.str.contains_any(list(k)).fill_null(False).alias(name) for k, name in tkeys.items()],
    )
    counts = hits.select([pl.col(name).sum() for name in tkeys.values()]).row(0, named=True)

    for members in groups.values():
        taken: pl.Series | None = None
        for i, pat in members:
            tcol = tkeys[tuple(sorted(set(pat.triggers)))]
            if not counts[tcol]:
                continue
            cond = pl.col(tcol)
            if pat.sources is not None:
                cond = cond & pl.col("source").is_in(list(pat.sources)).fill_null(False)
            if taken is not None:
                cond = cond & ~pl.col("__row").is_in(taken.implode())
            rows = hits.filter(cond).select("__row", "msg")
            if rows.height == 0:
                continue
            # the regex only runs on the rows that hold one of this pattern's triggers
            rows = rows.filter(msg.str.contains(pat.regex).fill_null(False))
            if rows.height == 0:
                continue
            parts.append(_pattern_narrow(rows, pat, i))
            taken = rows["__row"] if taken is None else pl.concat([taken, rows["__row"]])

    n = len(patterns)
    cap = pl.DataFrame()
    if parts:
        cap = pl.concat(parts, how="diagonal_relaxed")
    line_cols = ["__row", "file_index", "node", "rank", "local_rank", "msg", "raw", *_LINE_PASS]
    if cap.height:
        have = set(cap.columns)

        def c(name: str) -> pl.Expr:
            return pl.col(name) if name in have else pl.lit(None)

        ev = cap.join(cand.select(line_cols), on="__row", how="left")
        exprs = []
        for col, dtype in EVENT_SCHEMA.items():
            if col == "kind":
                e = pl.col("kind")
            elif col == "event_id":
                e = pl.concat_str([pl.col("source"), pl.col("file_index"), pl.col("line"), pl.col("kind")], separator=":")
            elif col == "message":
                e = pl.col("msg")
            elif col == "raw":
                e = pl.col("raw").str.slice(0, RAW_MAX)
            elif col == "fields":
                e = pl.col("fields")
            elif col in ("node", "rank", "local_rank"):
                e = pl.coalesce(c(f"c_{col}").cast(dtype, strict=False), pl.col(col))
            elif col in _LINE_PASS:
                e = pl.col(col)
            elif col == "gpu":
                bus = pl.col("__busid").cast(pl.String) if "__busid" in have else None
                e = normalize_gpu(c("__gpu").cast(pl.String), bus)
            elif col == "locator":
                e = pl.lit(None, dtype=pl.String)
            else:
                e = c(f"c_{col}")
            exprs.append(e.cast(dtype, strict=False).alias(col))
        exprs += [pl.col("file_index").cast(pl.Int32).alias("__fi"), pl.col("__prio")]
        single = ev.select(exprs)
    else:
        single = None

    frames = [] if single is None else [single]
    for j, asm in enumerate(assemblers):
        out = conform_events(asm(cand.drop("__row").lazy())).collect()
        if out.height:
            out = out.with_columns(
                pl.col("event_id").str.extract(r":(-?\d+):-?\d+:[^:]*$", 1).cast(pl.Int32, strict=False).alias("__fi"),
                pl.lit(n + j, dtype=pl.Int32).alias("__prio"),
            )
            frames.append(out)
    if not frames:
        return empty_events()
    ev = pl.concat(frames, how="vertical_relaxed")
    ev = _postprocess(ev.lazy()).collect()
    ev = ev.sort(["attempt_id", "source", "__fi", "line", "__prio"], nulls_last=True, maintain_order=True)
    ev = ev.unique(subset=["attempt_id", "event_id"], keep="first", maintain_order=True)
    return ev.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])


def _postprocess(lf: pl.LazyFrame) -> pl.LazyFrame:
    return lf.with_columns(
        pl.when(pl.col("signal").is_null() & (pl.col("exit_code") < 0))
        .then(-pl.col("exit_code"))
        .otherwise(pl.col("signal"))
        .cast(pl.Int32)
        .alias("signal"),
        normalize_severity(pl.col("severity")).alias("severity"),
        normalize_device(pl.col("device")).alias("device"),
    )


def extract_events(
    lines: pl.LazyFrame,
    patterns: Sequence[Pattern],
    *,
    assemblers: Sequence[Callable[[pl.LazyFrame], pl.LazyFrame]] | None = None,
    multiline_triggers: Sequence[str] | None = None,
) -> pl.LazyFrame:
    """Events (EVENT_SCHEMA, ordered by attempt, source, file, line, pattern order) of a line frame.

    ``assemblers``/``multiline_triggers`` default to ``transforms/multiline.py``'s ``ASSEMBLERS`` and
    ``MULTILINE_TRIGGERS``; pass ``[]`` to run the single-line patterns only.

    Plan: one vectorised Aho–Corasick prefilter (``str.contains_any`` over every trigger) over the whole ``msg``
    column, then one whole-frame step over the candidate lines (a handful per thousand in real logs): per pattern
    group a trigger filter, the group's regexes on the rows holding their triggers, ``str.extract_groups`` and a
    projection into EVENT_SCHEMA. No per-line Python.
    """
    with_headers = None
    if assemblers is None or multiline_triggers is None:
        assemblers = list(ASSEMBLERS) if assemblers is None else assemblers
        if multiline_triggers is None:
            multiline_triggers, with_headers = list(MULTILINE_TRIGGERS), or_entry_header
    assemblers = list(assemblers)
    patterns = list(patterns)
    triggers = sorted(set(trigger_literals(patterns)) | set(multiline_triggers or []))
    if not triggers or (not patterns and not assemblers):
        return empty_events().lazy()

    names = lines.collect_schema().names()
    missing = [c for c in LINE_SCHEMA if c not in names]
    lines = lines.with_columns([pl.lit(None).cast(LINE_SCHEMA[c]).alias(c) for c in missing]) if missing else lines
    keep = pl.col("msg").str.contains_any(triggers).fill_null(False)
    if with_headers:
        keep = with_headers(keep)
    cand = lines.select([pl.col(c).cast(t, strict=False) for c, t in LINE_SCHEMA.items()]).filter(keep)
    return cand.map_batches(
        lambda df: _extract_df(df, patterns, assemblers),
        schema=EVENT_SCHEMA,
        streamable=False,
    )


# --------------------------------------------------------------------------------------------- test helper

_DEFAULT_PATTERNS: list[Pattern] | None = None


def _default_patterns() -> list[Pattern]:
    global _DEFAULT_PATTERNS
    if _DEFAULT_PATTERNS is None:
        _DEFAULT_PATTERNS = load_patterns()
    return _DEFAULT_PATTERNS


def lines_frame(
    lines: Sequence[str],
    source: str = "applog",
    *,
    node: str | None = None,
    attempt_id: str = "test/t/0",
    uri: str = "mem://test",
) -> pl.DataFrame:
    """A minimal line frame: msg = raw, line = 1..n."""
    n = len(lines)
    return pl.DataFrame(
        {
            "attempt_id": [attempt_id] * n,
            "source": [source] * n,
            "file_index": [0] * n,
            "uri": [uri] * n,
            "line": list(range(1, n + 1)),
            "node": [node] * n,
            "rank": [None] * n,
            "local_rank": [None] * n,
            "ts": [None] * n,
            "ts_quality": ["none"] * n,
            "msg": list(lines),
            "raw": list(lines),
        },
        schema=LINE_SCHEMA,
    )


def events_from_text(
    lines: Sequence[str],
    source: str = "applog",
    *,
    patterns: Sequence[Pattern] | None = None,
    node: str | None = None,
) -> pl.DataFrame:
    """Run extract_events (+ multi-line assemblers) over literal lines; for tests and the line catalog."""
    pats = _default_patterns() if patterns is None else list(patterns)
    return extract_events(lines_frame(lines, source, node=node).lazy(), pats).collect()
