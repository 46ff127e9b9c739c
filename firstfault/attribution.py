"""Run the SQL rules over the events of many attempts at once and build their verdict rows.

The caller registers four relations on the connection: `events_all` (events, DESIGN §3), `attempts` (one context
row per attempt), `reports` (connector reports) — plus this module adds `xid_catalog` and `params`. Every rule file
is one SELECT returning rule hits (DESIGN §4); they are checked for the contract's columns, UNIONed, ranked
(`_rank.sql`) and turned into verdict rows (`_verdict.sql`).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import duckdb

from firstfault.config import Attribution
from firstfault.errors import BadInput

HIT_COLUMNS = (
    "attempt_id", "event_id", "rule_id", "role", "domain", "subdomain", "culprit_node", "culprit_rank", "gpu",
    "granularity", "strength", "ts", "summary", "action",
)
ROLES = ("root", "symptom", "confirmation", "ignored")
HEADER_KEYS = ("id", "detects", "domain", "inputs")


@dataclass(frozen=True)
class Rule:
    id: str
    path: Path
    sql: str
    header: dict[str, str]


def builtin_rules_dir() -> Path:
    return Path(str(resources.files("firstfault.rules_sql")))


def catalog_path() -> Path:
    return Path(str(resources.files("firstfault.warehouse") / "xid_catalog.csv"))


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


def load_rules(extra_dirs: Sequence[Path] = ()) -> list[Rule]:
    rules, seen = [], {}
    for folder in (builtin_rules_dir(), *extra_dirs):
        for path in sorted(Path(folder).glob("*.sql")):
            if path.name.startswith("_"):
                continue
            text = path.read_text(encoding="utf-8")
            header = parse_header(text)
            missing = [k for k in HEADER_KEYS if k not in header]
            if missing:
                raise BadInput(str(path), missing[0], "rule header key missing")
            if header["id"] != path.stem:
                raise BadInput(str(path), "id", f"must equal the file name {path.stem!r}")
            if header["id"] in seen:
                raise BadInput(str(path), "id", f"duplicate rule id, also in {seen[header['id']]}")
            seen[header["id"]] = path
            rules.append(Rule(header["id"], path, text.rstrip().rstrip(";"), header))
    return rules


def rules_version(rules: Sequence[Rule]) -> str:
    digest = hashlib.sha256()
    files = [r.path for r in rules] + sorted(builtin_rules_dir().glob("_*.sql")) + sorted(patterns_dir().glob("*.yaml")) + [catalog_path()]
    for path in sorted(files, key=lambda p: (p.name, str(p))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def register_reference(con: duckdb.DuckDBPyConnection, settings: Attribution, version: str) -> None:
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE xid_catalog AS SELECT * FROM read_csv('{catalog_path().as_posix()}', header = true, "
        "all_varchar = true)"
    )
    con.execute("CREATE OR REPLACE TEMP TABLE xid_catalog AS SELECT * REPLACE (CAST(code AS BIGINT) AS code) FROM xid_catalog")
    values = asdict(settings)
    cols = ", ".join(f"CAST(? AS DOUBLE) AS {k}" for k in values)
    con.execute(f"CREATE OR REPLACE TEMP TABLE params AS SELECT {cols}, CAST(? AS VARCHAR) AS rules_version", [*values.values(), version])


def check_rule_output(con: duckdb.DuckDBPyConnection, rule: Rule) -> None:
    described = con.execute(f"DESCRIBE ({rule.sql})").fetchall()
    names = tuple(row[0] for row in described)
    if names != HIT_COLUMNS:
        raise BadInput(str(rule.path), "columns", f"must be {', '.join(HIT_COLUMNS)}; got {', '.join(names)}")


def run_rules(con: duckdb.DuckDBPyConnection, rules: Sequence[Rule]) -> None:
    """Create `rule_hits`, `causes`, `outcome`, `evidence_rows` and `verdict_rows` temp tables."""
    _run_script(con, builtin_rules_dir() / "_views.sql")
    for rule in rules:
        check_rule_output(con, rule)
    typed = [
        f"SELECT attempt_id::VARCHAR AS attempt_id, event_id::VARCHAR AS event_id, rule_id::VARCHAR AS rule_id, role::VARCHAR AS role, "
        f"domain::VARCHAR AS domain, subdomain::VARCHAR AS subdomain, culprit_node::VARCHAR AS culprit_node, "
        f"culprit_rank::INTEGER AS culprit_rank, gpu::VARCHAR AS gpu, granularity::VARCHAR AS granularity, "
        f"strength::DOUBLE AS strength, ts::TIMESTAMP AS ts, summary::VARCHAR AS summary, action::VARCHAR AS action "
        f"FROM ({r.sql})"
        for r in rules
    ]
    con.execute("CREATE OR REPLACE TEMP TABLE rule_hits AS " + "\nUNION ALL\n".join(typed))
    bad = con.execute(f"SELECT DISTINCT rule_id, role FROM rule_hits WHERE role NOT IN {ROLES}").fetchall()
    if bad:
        raise BadInput(bad[0][0], "role", f"unknown role {bad[0][1]!r}")
    _run_script(con, builtin_rules_dir() / "_rank.sql")
    _run_script(con, builtin_rules_dir() / "_verdict.sql")


def _run_script(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    text = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("--"))
    for statement in re.split(r";\s*\n", text):
        if statement.strip():
            con.execute(statement)
