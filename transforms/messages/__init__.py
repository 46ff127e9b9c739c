"""The message catalogue: every failure message the emitters print, as data (one YAML file per emitter family).

Each entry is a format string read in the emitter's own source at a named tag (or a line from a public report), with
the event kind the extraction patterns must produce, the class (domain/subdomain) it argues for as a root, its
default role, its scope and at least one example line. The format is docs/rules.md#the-message-catalogue;
rules_sql/catalogue.py renders the examples through the production path and checks them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from firstfault import yamlio
from firstfault.errors import BadInput
from firstfault.schema import EVENT_SCHEMA

ROLES = ("root", "symptom", "confirmation", "near_miss", "benign", "context")
CLASSED_ROLES = ("root", "confirmation", "near_miss")  # what a root argues for, or what the entry would confirm or nearly was
SCOPES = ("gpu", "node", "rank", "peer", "job")
SOURCES = ("applog", "syslog", "scheduler")
DOMAINS = ("hardware", "network", "software", "application", "infrastructure")

FILE_KEYS = {"emitter", "repository", "messages"}
ENTRY_KEYS = {"id", "repository", "path", "tag", "versions", "format", "kind", "class", "role", "scope", "source",
              "note", "examples"}
REQUIRED_ENTRY_KEYS = ("id", "path", "format", "kind", "class", "role", "scope", "source", "examples")
EXAMPLE_KEYS = {"line", "lines", "rendered", "url", "expect"}
_ID = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)+")
_CLASS = re.compile(r"([a-z_]+)/([a-z0-9_]+)")


@dataclass(frozen=True)
class Example:
    lines: tuple[str, ...]  # usually one line; a message the emitter writes over several lines keeps them together
    url: str | None  # a real line: the public report it is quoted from; None = rendered from the format string
    expect: dict[str, Any]  # extra event columns to check (subset match; `fields` key by key)


@dataclass(frozen=True)
class Message:
    id: str
    emitter: str
    repository: str
    path: str
    version: str  # the tag read, or the version range where the format changed
    format: str
    kind: str | None
    cls: str | None  # "domain/subdomain"
    role: str
    scope: str
    source: str
    note: str | None
    examples: tuple[Example, ...]
    file: str


def catalogue_dir() -> Path:
    return Path(str(resources.files(__name__)))


def load_catalogue(folder: str | Path | None = None) -> list[Message]:
    """Every entry of every `*.yaml` file in `folder` (default: the shipped catalogue), validated, in file order."""
    messages: list[Message] = []
    seen: dict[str, str] = {}
    for path in sorted(Path(folder or catalogue_dir()).glob("*.yaml")):
        for message in _load_file(path):
            if message.id in seen:
                raise BadInput(str(path), message.id, f"duplicate id, also in {seen[message.id]}")
            seen[message.id] = path.name
            messages.append(message)
    return messages


def _load_file(path: Path) -> list[Message]:
    try:
        doc = yamlio.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise BadInput(str(path), None, yamlio.describe_error(e)) from None
    if not isinstance(doc, dict):
        raise BadInput(str(path), None, "a catalogue file is a mapping with emitter, repository and messages")
    unknown = set(doc) - FILE_KEYS
    if unknown:
        raise BadInput(str(path), sorted(unknown)[0], f"unknown key (allowed: {', '.join(sorted(FILE_KEYS))})")
    for key in ("emitter", "repository"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise BadInput(str(path), key, "required string")
    entries = doc.get("messages")
    if not isinstance(entries, list) or not entries:
        raise BadInput(str(path), "messages", "a non-empty list of entries")
    return [_entry(path, doc, i, e) for i, e in enumerate(entries)]


def _entry(path: Path, doc: dict, index: int, e: Any) -> Message:
    if not isinstance(e, dict):
        raise BadInput(str(path), f"messages[{index}]", "must be a mapping")
    where = e.get("id") if isinstance(e.get("id"), str) else f"messages[{index}]"

    def fail(key: str, problem: str):
        raise BadInput(str(path), f"{where}.{key}", problem)

    unknown = set(e) - ENTRY_KEYS
    if unknown:
        fail(sorted(unknown)[0], "unknown key")
    for key in REQUIRED_ENTRY_KEYS:
        if key not in e:
            fail(key, "required")
    if not isinstance(e["id"], str) or not _ID.fullmatch(e["id"]):
        fail("id", "a dotted lower-case id such as linux.oom.killed_process")
    for key in ("path", "format"):
        if not isinstance(e[key], str) or not e[key]:
            fail(key, "required string")
    if ("tag" in e) == ("versions" in e) or not isinstance(e.get("tag", e.get("versions")), str):
        fail("tag", "exactly one of `tag` (the tag read) or `versions` (where the format changed), a string")
    if e["kind"] is not None and (not isinstance(e["kind"], str) or not e["kind"]):
        fail("kind", "an event kind or null")
    if e["role"] not in ROLES:
        fail("role", f"one of {', '.join(ROLES)}")
    if e["scope"] not in SCOPES:
        fail("scope", f"one of {', '.join(SCOPES)}")
    if e["source"] not in SOURCES:
        fail("source", f"one of {', '.join(SOURCES)}")
    cls = e["class"]
    if cls is not None or e["role"] == "root":
        match = _CLASS.fullmatch(cls) if isinstance(cls, str) else None
        if not match or match.group(1) not in DOMAINS:
            fail("class", f"domain/subdomain with a domain of {', '.join(DOMAINS)} (a root names its class)")
    if cls is not None and e["role"] not in CLASSED_ROLES:
        fail("class", f"null for a {e['role']} (only {', '.join(CLASSED_ROLES)} name a class)")
    if e["role"] == "root" and e["kind"] is None:
        fail("kind", "a root yields an event")
    if e.get("note") is not None and not isinstance(e["note"], str):
        fail("note", "a string")
    examples = e["examples"]
    if not isinstance(examples, list) or not examples:
        fail("examples", "at least one example")
    return Message(
        id=e["id"], emitter=doc["emitter"], repository=e.get("repository") or doc["repository"], path=e["path"],
        version=e.get("tag", e.get("versions")), format=e["format"], kind=e["kind"], cls=cls, role=e["role"],
        scope=e["scope"], source=e["source"], note=e.get("note"),
        examples=tuple(_example(fail, n, x) for n, x in enumerate(examples)), file=path.name)


def _example(fail, n: int, x: Any) -> Example:
    key = f"examples[{n}]"
    if not isinstance(x, dict):
        fail(key, "must be a mapping")
    unknown = set(x) - EXAMPLE_KEYS
    if unknown:
        fail(f"{key}.{sorted(unknown)[0]}", "unknown key")
    if ("line" in x) == ("lines" in x):
        fail(key, "exactly one of `line` or `lines`")
    lines = [x["line"]] if "line" in x else x["lines"]
    if not isinstance(lines, list) or not lines or not all(isinstance(s, str) and s and "\n" not in s for s in lines):
        fail(key, "`line` is one non-empty line (`lines` a list of them)")
    url = x.get("url")
    if (x.get("rendered") is True) == (url is not None):
        fail(key, "exactly one of `rendered: true` (from the format string) or `url` (a real line's report)")
    if url is not None and (not isinstance(url, str) or not url.startswith("https://")):
        fail(f"{key}.url", "an https:// address")
    expect = x.get("expect") or {}
    if not isinstance(expect, dict):
        fail(f"{key}.expect", "a mapping of event columns")
    bad = sorted(k for k in expect if k not in EVENT_SCHEMA)
    if bad:
        fail(f"{key}.expect.{bad[0]}", "not an event column")
    if "fields" in expect and not isinstance(expect["fields"], dict):
        fail(f"{key}.expect.fields", "a mapping of field names to values")
    return Example(tuple(lines), url, expect)
