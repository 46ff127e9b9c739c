"""`firstfault rules test|lint`: the rule test kit for built-in and site rules (docs/rules.md)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
from firstfault.rules_sql.cases import load_cases, run_cases
from firstfault.rules_sql.engine import (
    builtin_rules_dir,
    check_rule_output,
    collect_rules,
    patterns_dir,
    create_shared_views,
    register_empty_inputs,
    register_reference,
    rule_files,
)
from firstfault.transforms.extract import PatternError, load_pattern_file

from firstfault.config import AttributionSettings, Config
from firstfault.errors import BadInput


@dataclass(frozen=True)
class KitDirs:
    fixtures: list[Path]  # fixture YAML folders whose cases run / are linted
    rules: list[Path]  # rule folders after the built-ins
    patterns: list[Path]  # pattern folders after the built-ins


def resolve_dirs(config: Config, dirs: Sequence[str], pattern_dirs: Sequence[str] = ()) -> KitDirs:
    """Fixture folders = DIR arguments, or the config's rule folders plus the built-in rules' folder (the package's
    `rules_sql`, whose fixtures ship beside the rules). Rule folders = the config's plus every fixture folder that
    holds rule files (rules and fixtures may sit side by side), the built-in ones being loaded anyway."""
    if dirs:
        fixtures = [Path(d) for d in dirs]
        for d in fixtures:
            if not d.is_dir():
                raise BadInput(str(d), "DIR", "no such directory")
    else:
        fixtures = [Path(d) for d in config.rules.dirs] + [builtin_rules_dir()]
    rules = _unique([Path(d) for d in config.rules.dirs] + [d for d in fixtures if rule_files(d)])
    rules = [d for d in rules if d.resolve() != builtin_rules_dir().resolve()]
    patterns = _unique([Path(d) for d in (*config.patterns.dirs, *pattern_dirs)])
    for d in patterns:
        if not d.is_dir():
            raise BadInput(str(d), "--patterns", "no such directory")
    return KitDirs(_unique(fixtures), rules, patterns)


def _unique(folders: list[Path]) -> list[Path]:
    out, seen = [], set()
    for f in folders:
        if f.resolve() not in seen:
            seen.add(f.resolve())
            out.append(f)
    return out


def run_tests(dirs: KitDirs) -> tuple[list[tuple[str, list[str]]], int]:
    """(case id, failed expectations) per case in file order, and the number of cases."""
    cases = load_cases(dirs.fixtures)
    if not cases:
        raise BadInput(", ".join(map(str, dirs.fixtures)) or "(no folders)", "cases", "no fixture cases found")
    outcomes = run_cases(cases, dirs.rules, dirs.patterns)
    return [(case.id, outcomes[case.id]) for case in cases], len(cases)


def lint(dirs: KitDirs) -> tuple[list[str], str]:
    """Every problem found (one line each) and a summary of what was checked."""
    problems: list[str] = []
    rules, rule_problems = collect_rules(dirs.rules)
    problems += [str(p) for p in rule_problems]

    pattern_files = [p for d in (patterns_dir(), *dirs.patterns) for p in sorted(Path(d).glob("*.yaml"))]
    for path in pattern_files:
        try:
            load_pattern_file(path)
        except PatternError as e:
            problems.append(f"{path}: {e}")
        except Exception as e:  # YAML syntax and the like
            problems.append(f"{path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

    cases = []
    for folder in dirs.fixtures:
        try:
            cases += load_cases([folder])
        except BadInput as e:
            problems.append(str(e))

    known = {r.id for r in rules}
    with_builtin = any(d.resolve() == builtin_rules_dir().resolve() for d in dirs.fixtures)
    user_folders = {d.resolve() for d in dirs.rules}
    tested = {c.rule for c in cases}
    for rule in rules:
        in_scope = rule.path.parent.resolve() in user_folders or rule.id in tested or (
            with_builtin and rule.path.parent.resolve() == builtin_rules_dir().resolve())
        if not in_scope:
            continue
        kinds = {c.kind for c in cases if c.rule == rule.id}
        for kind in ("positive", "negative"):
            if kind not in kinds:
                where = ", ".join(str(d) for d in dirs.fixtures)
                problems.append(f"{rule.path}: field 'cases': no {kind} fixture case for rule {rule.id!r} in {where}")
    for case in cases:
        for key in ("hits", "no_hits"):
            for want in case.expect.get(key, []):
                rid = want.get("rule_id")
                if rid is not None and rid not in known:
                    problems.append(f"{case.path}: field '{case.name}.expect.{key}': unknown rule_id {rid!r}")

    con = duckdb.connect()
    try:
        register_empty_inputs(con)
        register_reference(con, AttributionSettings(), "lint")
        create_shared_views(con)
        for rule in rules:
            try:
                check_rule_output(con, rule)
            except BadInput as e:
                problems.append(str(e))
            except Exception as e:  # a Python rule that crashes on empty inputs
                problems.append(f"{rule.path}: field 'hits': {type(e).__name__}: {e}")
    finally:
        con.close()
    n_py = sum(r.language == "python" for r in rules)
    summary = (f"{len(rules)} rules ({len(rules) - n_py} SQL, {n_py} Python), {len(cases)} fixture cases, "
               f"{len(pattern_files)} pattern files")
    return problems, summary
