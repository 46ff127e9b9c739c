"""Run the SQL rules over the events of many attempts at once and build their verdict rows.

The caller registers the lake's relations on the connection: `events_all` (events, DESIGN §3), `progress` (training
progress per rank and minute), `attempts` (one context row per attempt), `reports` (connector reports) — plus this module adds `xid_catalog`, `exception_symptoms` (rules_sql/exception_symptoms.py), `strengths` with its macro `strength(key)` (rules_sql/strengths.py) and `params`. Every rule file
is one SELECT returning rule hits (DESIGN §4); they are checked for the contract's columns, UNIONed, ranked
(`_rank.sql`) and turned into verdict rows (the other RANKING_SCRIPTS).

A rule may also be a Python file (`*.py` with a top-level `RULE = {...}` header dict and
`def hits(con) -> duckdb.DuckDBPyRelation | pyarrow.Table`) for logic SQL cannot express: it is imported from its
path (never via sys.path), called with the connection once the shared views exist, and its result becomes a temp
table that is checked and UNIONed like a SQL rule's SELECT.
"""
from __future__ import annotations

import ast
import csv
import hashlib
import json
import importlib.util
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from firstfault.config import AttributionSettings
from firstfault.errors import BadInput
from firstfault.rules_sql.chains import chains_path, chains_tables
from firstfault.schema import (
    CONNECTOR_REPORT_SCHEMA,
    CONTEXT_SCHEMA,
    EVENTS_ARROW_SCHEMA,
    PROGRESS_SCHEMA,
    HIT_COLUMNS,
    METRICS_SCHEMA,
    ROLES,
    xid_catalog_path,
    xid_spread_path,
)
from firstfault.rules_sql.exception_symptoms import shipped_exception_symptoms
from firstfault.rules_sql.selection import NEEDS, needed_rules
from firstfault.rules_sql.strengths import check_strength_keys, inline_strengths, register_strengths, strengths_path
from firstfault.transforms.messages import catalogue_dir

HEADER_KEYS = ("id", "detects", "domain", "inputs")
# The built-in scripts that are not rules: the shared views every rule reads (run before the rules), then the ranking,
# run after them in this order, each reading the tables of the ones before: the chains (_rank), the cause model
# (_rank_causes), the verdict (_rank_decide), why not the runner-up (_why_not), its quality (_confidence), the verdict
# rows (_verdict), the history-aware action (_action).
VIEWS_SCRIPT = "_views.sql"
RANKING_SCRIPTS = ("_rank.sql", "_rank_causes.sql", "_rank_decide.sql", "_why_not.sql", "_confidence.sql", "_verdict.sql", "_action.sql")


@dataclass(frozen=True)
class Rule:
    id: str
    path: Path
    sql: str  # the SELECT; for a Python rule: SELECT * FROM the temp table its hits() result is stored in
    header: dict[str, str]
    hits: Callable | None = field(default=None, compare=False)  # Python rules only

    @property
    def language(self) -> str:
        return "sql" if self.hits is None else "python"


def python_rule_table(rule_id: str) -> str:
    return f"_pyrule_{rule_id}"


def builtin_rules_dir() -> Path:
    return Path(str(resources.files("firstfault.rules_sql")))


def patterns_dir() -> Path:
    return Path(str(resources.files("firstfault.transforms") / "patterns"))


def parse_header(text: str) -> dict[str, str]:
    header = {}
    for line in text.splitlines():
        m = re.match(r"--\s*(\w+):\s*(.*)$", line)
        if not m:
            if line.startswith("--"):
                continue
            break
        header[m.group(1)] = m.group(2).strip()
    return header


def rule_files(folder: Path) -> list[Path]:
    """Rule files of a folder: `*.sql`, and `*.py` with a top-level `RULE` assignment (helpers and test modules
    beside them are not rules); names starting with `_` are skipped."""
    out = []
    for path in sorted(Path(folder).glob("*.sql")) + sorted(Path(folder).glob("*.py")):
        if path.name.startswith("_"):
            continue
        if path.suffix == ".py" and not _defines_rule(path):
            continue
        out.append(path)
    return sorted(out, key=lambda p: p.name)


def _defines_rule(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, ValueError):
        return True  # let load_rule report it
    if not re.search(r"\bRULE\b", text):  # parsing every helper module beside the rules costs more than the rules
        return False
    try:
        tree = ast.parse(text, str(path))
    except (SyntaxError, ValueError):
        return True
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "RULE" for t in targets):
            return True
    return False


def load_rule(path: Path) -> Rule:
    """One rule file; BadInput (file + field) when its header or interface is wrong."""
    if path.suffix == ".py":
        return _load_python_rule(path)
    text = path.read_text(encoding="utf-8")
    header = parse_header(text)
    _check_header(path, header)
    return Rule(header["id"], path, inline_strengths(path, text).rstrip().rstrip(";"), header)


def _check_header(path: Path, header: dict) -> None:
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise BadInput(str(path), missing[0], "rule header key missing")
    empty = [k for k in HEADER_KEYS if not isinstance(header[k], str) or not header[k].strip()]
    if empty:
        raise BadInput(str(path), empty[0], "rule header value must be a non-empty string")
    if header["id"] != path.stem:
        raise BadInput(str(path), "id", f"must equal the file name {path.stem!r}")
    if "needs" in header and not NEEDS.fullmatch(str(header["needs"]).strip()):
        raise BadInput(str(path), "needs", "must list event kinds, separated by ', '")


def _load_python_rule(path: Path) -> Rule:
    check_strength_keys(path, path.read_text(encoding="utf-8"))
    module_name = f"firstfault_rule_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BadInput(str(path), None, "cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)  # not put in sys.modules, sys.path untouched
    except Exception as e:
        raise BadInput(str(path), None, f"import failed: {type(e).__name__}: {e}") from None
    header = getattr(module, "RULE", None)
    if not isinstance(header, dict):
        raise BadInput(str(path), "RULE", "must be a dict with keys " + ", ".join(HEADER_KEYS))
    header = {k: (", ".join(v) if isinstance(v, (list, tuple)) else v) for k, v in header.items()}
    _check_header(path, header)
    hits = getattr(module, "hits", None)
    if not callable(hits):
        raise BadInput(str(path), "hits", "must be a function hits(con) returning a DuckDB relation or a pyarrow Table")
    return Rule(header["id"], path, f'SELECT * FROM "{python_rule_table(header["id"])}"', header, hits)


def collect_rules(extra_dirs: Sequence[Path] = ()) -> tuple[list[Rule], list[BadInput]]:
    """Built-in rules then those of `extra_dirs`, plus every problem found (instead of stopping at the first)."""
    rules, problems, seen = [], [], {}
    folders, done = [], set()
    for folder in (builtin_rules_dir(), *map(Path, extra_dirs)):
        key = folder.resolve()
        if key not in done:
            done.add(key)
            folders.append(folder)
    for folder in folders:
        if not folder.is_dir():
            problems.append(BadInput(str(folder), None, "no such rules directory"))
            continue
        for path in rule_files(folder):
            try:
                rule = load_rule(path)
            except BadInput as e:
                problems.append(e)
                continue
            if rule.id in seen:
                problems.append(BadInput(str(path), "id", f"duplicate rule id, also in {seen[rule.id]}"))
                continue
            seen[rule.id] = path
            rules.append(rule)
    return rules, problems


def load_rules(extra_dirs: Sequence[Path] = ()) -> list[Rule]:
    rules, problems = collect_rules(extra_dirs)
    if problems:
        raise problems[0]
    return rules


def rules_version(rules: Sequence[Rule], settings: AttributionSettings, pattern_dirs: Sequence[Path] = ()) -> str:
    """What decides a verdict besides the attempt's own input: the rule, view and ranking files, the patterns, the
    message and Xid catalogues, the chains, the strengths, and the [attribution] settings (new thresholds are a new judgement: the
    nightly attributes every attempt again)."""
    digest = hashlib.sha256()
    scripts = [builtin_rules_dir() / name for name in (VIEWS_SCRIPT, *RANKING_SCRIPTS)]
    files = [r.path for r in rules] + scripts + sorted(patterns_dir().glob("*.yaml")) + [xid_catalog_path(), xid_spread_path(), chains_path(), strengths_path()]
    files += [p for d in pattern_dirs for p in sorted(Path(d).glob("*.yaml"))]
    files += sorted(catalogue_dir().glob("*.yaml"))  # exception_symptoms comes from the message catalogue
    for path in sorted(files, key=lambda p: (p.name, str(p))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(json.dumps(asdict(settings), sort_keys=True).encode())
    return digest.hexdigest()[:12]


def register_reference(con: duckdb.DuckDBPyConnection, settings: AttributionSettings, version: str) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE exception_symptoms (id VARCHAR, pattern VARCHAR)")
    if symptoms := [list(row) for row in shipped_exception_symptoms()]:
        con.executemany("INSERT INTO exception_symptoms VALUES (?, ?)", symptoms)
    # read here, not by read_csv: DuckDB's dialect sniffing costs more than the rest of the reference tables together
    con.register("_xid_catalog", _text_table(xid_catalog_path()))
    con.register("_xid_spread", _text_table(xid_spread_path()))
    con.execute(
        "CREATE OR REPLACE TEMP TABLE xid_catalog AS SELECT c.* REPLACE (CAST(c.code AS BIGINT) AS code), s.spread_subdomain "
        "FROM _xid_catalog c LEFT JOIN _xid_spread s ON s.code = c.code"
    )
    con.unregister("_xid_catalog")
    con.unregister("_xid_spread")
    register_chains(con)
    register_strengths(con)
    values = asdict(settings)
    cols = ", ".join(f"CAST(? AS DOUBLE) AS {k}" for k in values)
    con.execute(f"CREATE OR REPLACE TEMP TABLE params AS SELECT {cols}, CAST(? AS VARCHAR) AS rules_version", [*values.values(), version])


def _text_table(path: Path) -> pa.Table:
    """A shipped CSV file with a header, every column text, an empty field NULL (as DuckDB's read_csv has it)."""
    with path.open(encoding="utf-8", newline="") as f:
        header, *rows = csv.reader(f)
    return pa.table({name: pa.array([row[i] or None for row in rows], pa.string()) for i, name in enumerate(header)})


def register_chains(con: duckdb.DuckDBPyConnection) -> None:
    """The causal chains (`chains.yaml`) as the tables `causal_chains`, `silent_node_classes` and `advisory_severities`
    the ranking reads."""
    chains, silent, advisory = chains_tables()
    for name, table in (("causal_chains", chains), ("silent_node_classes", silent), ("advisory_severities", advisory)):
        con.register(f"_{name}", table)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _{name}")
        con.unregister(f"_{name}")


def register_empty_inputs(con: duckdb.DuckDBPyConnection) -> None:
    """Empty `events_all`, `progress`, `attempts`, `reports` and `metrics` with the lake's schemas (what `rules lint` checks
    every rule's output columns against)."""
    metrics = pl.DataFrame(schema={"attempt_id": pl.String, **METRICS_SCHEMA}).to_arrow()
    for name, table in (
        ("events_all", EVENTS_ARROW_SCHEMA.empty_table()),
        ("progress", PROGRESS_SCHEMA.empty_table()),
        ("attempts_raw", CONTEXT_SCHEMA.empty_table()),
        ("reports", CONNECTOR_REPORT_SCHEMA.empty_table()),
        ("metrics", metrics),
    ):
        con.register(f"_empty_{name}", table)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _empty_{name}")
        con.unregister(f"_empty_{name}")
    con.execute("CREATE OR REPLACE TEMP TABLE attempts AS SELECT *, strftime(start_ts, '%Y-%m-%d') AS day FROM attempts_raw")


def create_shared_views(con: duckdb.DuckDBPyConnection) -> None:
    """The shared views every rule reads (`_views.sql`); inputs and reference tables must be registered."""
    _run_script(con, builtin_rules_dir() / VIEWS_SCRIPT)


def materialize_python_rule(con: duckdb.DuckDBPyConnection, rule: Rule) -> None:
    """Call a Python rule's hits(con) and store the result as the temp table its `sql` selects from."""
    table = python_rule_table(rule.id)
    try:
        result = rule.hits(con)
    except duckdb.Error as e:
        raise BadInput(str(rule.path), "hits", f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
    if isinstance(result, duckdb.DuckDBPyRelation):
        result.create_view(f"{table}_result", replace=True)
        con.execute(f'CREATE OR REPLACE TEMP TABLE "{table}" AS SELECT * FROM "{table}_result"')
        con.execute(f'DROP VIEW "{table}_result"')
        return
    if hasattr(result, "to_arrow") and not hasattr(result, "schema"):  # a polars DataFrame
        result = result.to_arrow()
    try:
        con.register(f"{table}_result", result)
    except Exception:
        raise BadInput(str(rule.path), "hits", f"must return a DuckDB relation or a pyarrow Table, got {type(result).__name__}") from None
    try:
        con.execute(f'CREATE OR REPLACE TEMP TABLE "{table}" AS SELECT * FROM "{table}_result"')
    finally:
        con.unregister(f"{table}_result")


def check_rule_output(con: duckdb.DuckDBPyConnection, rule: Rule) -> None:
    if rule.hits is not None:
        materialize_python_rule(con, rule)
    try:
        described = con.execute(f"DESCRIBE ({rule.sql})").fetchall()
    except duckdb.Error as e:
        raise BadInput(str(rule.path), "sql", f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
    names = tuple(row[0] for row in described)
    if names != HIT_COLUMNS:
        raise BadInput(str(rule.path), "columns", f"must be {', '.join(HIT_COLUMNS)}; got {', '.join(names)}")


def run_rules(con: duckdb.DuckDBPyConnection, rules: Sequence[Rule]) -> None:
    """Create `rule_hits`, `causes`, `outcome`, `evidence_rows` and `verdict_rows` temp tables. Rules that read only
    event kinds absent from the run are not planned (rules_sql/selection.py): they could not hit."""
    create_shared_views(con)
    builtin = builtin_rules_dir()
    for rule in rules:
        # a site's rules are checked here (exit 2 naming the file), needed or not; the built-in ones by `rules lint`
        if rule.hits is not None or rule.path.parent != builtin:
            check_rule_output(con, rule)
    rules = needed_rules(rules, [kind for (kind,) in con.execute("SELECT DISTINCT kind FROM events").fetchall()])
    typed = [
        f"SELECT attempt_id::VARCHAR AS attempt_id, event_id::VARCHAR AS event_id, rule_id::VARCHAR AS rule_id, role::VARCHAR AS role, "
        f"domain::VARCHAR AS domain, subdomain::VARCHAR AS subdomain, culprit_node::VARCHAR AS culprit_node, "
        f"culprit_rank::INTEGER AS culprit_rank, gpu::VARCHAR AS gpu, granularity::VARCHAR AS granularity, "
        f"strength::DOUBLE AS strength, ts::TIMESTAMP AS ts, summary::VARCHAR AS summary, action::VARCHAR AS action "
        f"FROM ({r.sql})"
        for r in rules or [_NO_RULE]
    ]
    con.execute("CREATE OR REPLACE TEMP TABLE rule_hits AS " + "\nUNION ALL\n".join(typed))
    bad = con.execute(f"SELECT DISTINCT rule_id, role FROM rule_hits WHERE role NOT IN {ROLES}").fetchall()
    if bad:
        raise BadInput(bad[0][0], "role", f"unknown role {bad[0][1]!r}")
    for name in RANKING_SCRIPTS:
        _run_script(con, builtin_rules_dir() / name)


# Stands in for the rules when none is needed: rule_hits still gets its columns.
_NO_RULE = Rule("none", Path(), "SELECT " + ", ".join(f"NULL AS {c}" for c in HIT_COLUMNS) + " LIMIT 0", {})


def _run_script(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    text = "\n".join(line for line in inline_strengths(path, path.read_text(encoding="utf-8")).splitlines()
                     if not line.lstrip().startswith("--"))
    for statement in re.split(r";\s*\n", text):
        if statement.strip():
            con.execute(statement)
