"""The causal chains table (`rules_sql/chains.yaml`, docs/DESIGN.md §4.2): cause-to-effect knowledge as data. Each row
says that a root hit of the effect's class inside the scope and time window of a cause is that cause's symptom (or,
for `relation: recovered`, a near miss the cause recovered), whatever the effect's own strength. The ranking reads
the rows as the table `causal_chains`, and the classes whose job-level causes name the node that went silent first
as `silent_node_classes`."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import pyarrow as pa

from firstfault import yamlio
from firstfault.errors import BadInput
from firstfault.schema import CAUSAL_CHAINS_SCHEMA, SILENT_NODE_CLASSES_SCHEMA

CHAINS_FILE = "chains.yaml"
SCOPES = ("gpu", "node", "rank", "device", "peer_address", "reporter", "job")
UNSTAMPED = ("order", "after_stamped", "any")
RELATIONS = ("symptom", "recovered")
ROW_KEYS = {"id", "cause", "effect", "when", "unless", "scope", "window", "unstamped", "relation", "source", "why", "fixture"}
SIDE_KEYS = {"class", "kind", "codes", "texts"}
CONDITIONS = ("when", "unless")


def chains_path() -> Path:
    return Path(str(resources.files("firstfault.rules_sql") / CHAINS_FILE))


def load_chains(path: Path | None = None) -> tuple[list[dict], list[dict]]:
    """(chain rows, silent-node classes) of a chains file, checked; BadInput names the row and field."""
    path = path or chains_path()
    doc = yamlio.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("chains"), list):
        raise BadInput(str(path), "chains", "a chains file is a mapping with a `chains` list")
    rows, seen = [], set()
    for i, raw in enumerate(doc["chains"]):
        expanded = _chain_rows(path, i, raw)
        if expanded[0]["id"] in seen:
            raise BadInput(str(path), f"chains[{i}].id", f"duplicate chain id {expanded[0]['id']!r}")
        seen.add(expanded[0]["id"])
        rows.extend(expanded)
    silent = []
    for i, raw in enumerate(doc.get("silent_node_classes") or []):
        where = f"silent_node_classes[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("class"), str) or not raw.get("source") or not raw.get("why"):
            raise BadInput(str(path), where, "needs `class` (domain/subdomain), `source` and `why`")
        domain, subdomain = _class(path, where, raw["class"])
        silent.append({"domain": domain, "subdomain": subdomain})
    return rows, silent


def load_advisory_severities(path: Path | None = None) -> list[str]:
    """The event severities whose emitter calls the record non-fatal (`advisory_severities`): such a root needs a
    witnessed consequence (docs/DESIGN.md §4.2)."""
    path = path or chains_path()
    doc = yamlio.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for i, raw in enumerate(doc.get("advisory_severities") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("severity"), str) or not raw.get("source") or not raw.get("why"):
            raise BadInput(str(path), f"advisory_severities[{i}]", "needs `severity`, `source` and `why`")
        out.append(raw["severity"])
    return out


def chains_tables() -> tuple[pa.Table, pa.Table, pa.Table]:
    rows, silent = load_chains()
    advisory = pa.table({"severity": pa.array(load_advisory_severities(), pa.string())})
    return (pa.Table.from_pylist(rows, CAUSAL_CHAINS_SCHEMA), pa.Table.from_pylist(silent, SILENT_NODE_CLASSES_SCHEMA),
            advisory)


def _chain_rows(path: Path, i: int, raw) -> list[dict]:
    where = f"chains[{i}]"
    check_row(path, where, raw, ROW_KEYS, ("id", "scope", "source", "why", "fixture"))
    if not raw["source"].startswith("https://"):
        raise BadInput(str(path), f"{where}.source", "must be an https:// URL (vendor or kernel documentation, a public report)")
    if raw["scope"] not in SCOPES:
        raise BadInput(str(path), f"{where}.scope", f"must be one of {', '.join(SCOPES)}")
    unstamped = raw.get("unstamped", "order")
    if unstamped not in UNSTAMPED:
        raise BadInput(str(path), f"{where}.unstamped", f"must be one of {', '.join(UNSTAMPED)}")
    relation = raw.get("relation", "symptom")
    if relation not in RELATIONS:
        raise BadInput(str(path), f"{where}.relation", f"must be one of {', '.join(RELATIONS)}")
    window = raw.get("window")
    if (not isinstance(window, list) or len(window) != 2 or not isinstance(window[0], (int, float))
            or not (window[1] is None or isinstance(window[1], (int, float))) or (window[1] is not None and window[1] < window[0])):
        raise BadInput(str(path), f"{where}.window", "must be [from_s, to_s]: the effect's time minus the cause's, to_s null = no bound")
    row = {"id": raw["id"], "scope": raw["scope"], "before_s": float(window[0]),
           "after_s": None if window[1] is None else float(window[1]), "unstamped": unstamped, "relation": relation,
           "source": raw["source"], "why": raw["why"].strip(), "fixture": raw["fixture"], **_condition(path, where, raw)}
    # a side that lists several classes stands for one row per class (every cause class with every effect class)
    return [{**row, **{f"cause_{k}": v for k, v in cause.items()}, **{f"effect_{k}": v for k, v in effect.items()}}
            for cause in _sides(path, f"{where}.cause", raw.get("cause"))
            for effect in _sides(path, f"{where}.effect", raw.get("effect"))]


def check_row(path: Path, where: str, raw, allowed: set[str], required: tuple[str, ...]) -> None:
    """A row of a reference table: a mapping of `allowed` keys whose `required` ones are non-empty strings."""
    if not isinstance(raw, dict):
        raise BadInput(str(path), where, "must be a mapping")
    unknown = set(raw) - allowed
    if unknown:
        raise BadInput(str(path), f"{where}.{sorted(unknown)[0]}", "unknown key")
    for key in required:
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise BadInput(str(path), f"{where}.{key}", "required, a non-empty string")


def _condition(path: Path, where: str, raw: dict) -> dict:
    """`when` / `unless`: a root hit of that side (one class) in the row's scope and window of both its cause and its
    effect must be present / absent for the row to hold (`condition_present` true / false; null: no condition)."""
    named = [key for key in CONDITIONS if key in raw]
    if not named:
        return {"condition_present": None}
    if len(named) > 1:
        raise BadInput(str(path), f"{where}.unless", "a row has `when` or `unless`, not both")
    sides = _sides(path, f"{where}.{named[0]}", raw[named[0]])
    if len(sides) > 1:
        raise BadInput(str(path), f"{where}.{named[0]}.class", "a condition names one class")
    return {"condition_present": named[0] == "when", **{f"condition_{k}": v for k, v in sides[0].items()}}


def _sides(path: Path, where: str, spec) -> list[dict]:
    """A cause or effect: `class` (domain/subdomain, `domain/*` for any subdomain, or a list of them) and/or an event
    `kind`, optionally narrowed to `codes` (event code) or `texts` (event code_text). A cause without a class is any
    event of the kind. One side per class."""
    if not isinstance(spec, dict) or not (set(spec) <= SIDE_KEYS) or not ({"class", "kind"} & set(spec)):
        raise BadInput(str(path), where, "a mapping with `class` and/or `kind` (optional `codes`, `texts`)")
    named = spec.get("class")
    named = named if isinstance(named, list) else [named]
    if not named:
        raise BadInput(str(path), f"{where}.class", "an empty list names no class")
    classes = [_class(path, f"{where}.class", c) for c in named] if "class" in spec else [(None, None)]
    codes, texts = spec.get("codes"), spec.get("texts")
    if codes is not None and (not isinstance(codes, list) or not all(isinstance(c, int) for c in codes)):
        raise BadInput(str(path), f"{where}.codes", "must be a list of integers")
    if texts is not None and (not isinstance(texts, list) or not all(isinstance(t, str) for t in texts)):
        raise BadInput(str(path), f"{where}.texts", "must be a list of strings")
    return [{"domain": domain, "subdomain": subdomain, "kind": spec.get("kind"), "codes": codes, "texts": texts}
            for domain, subdomain in classes]


def _class(path: Path, where: str, value) -> tuple[str, str | None]:
    domain, _, subdomain = str(value).partition("/")
    if not domain or not subdomain:
        raise BadInput(str(path), where, "must be domain/subdomain (domain/* for any subdomain)")
    return domain, None if subdomain == "*" else subdomain
