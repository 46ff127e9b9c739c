"""The documentation in docs/ matches the code, and no file of the repository cites a document it does not hold.

* every static-context key the validator accepts (and every sub-key of its list entries) is in docs/static-context.md;
* every section and key of firstfault.toml (read from the `Config` dataclasses) is in docs/configuration.md with its
  default, and firstfault/firstfault.example.toml (the example `firstfault init` writes) sets every key to its default and loads;
* every relative markdown link resolves (file and heading), every `*.md` file name mentioned anywhere resolves to a
  file of the repository, no file cites the reference documents that are not part of it, and `DESIGN §N` /
  `README "Section"` citations name sections that exist;
* every `sh` block of a docs page runs as written, in a fresh folder after the demo.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
import tomllib
from functools import cache
from pathlib import Path

import pytest

from firstfault import config as config_module
from firstfault.config import Config, load_config
from firstfault.connectors.static_context import KNOWN_KEYS, context_from_dict

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
THIS_FILE = Path(__file__).resolve()


# ------------------------------------------------------------------------------------------------ static context


class _KeysRead(dict):
    """A mapping that records every key the code looks up in it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


def _entry_keys_read(list_key: str, entry: dict) -> set[str]:
    """The keys the static-context validator reads from one entry of the list `list_key`."""
    probe = _KeysRead(entry)
    doc = {"workload_id": "docs", "start": "2026-11-29T00:00:00Z", "nodes": ["node-01"], list_key: [probe]}
    context_from_dict(doc, "<docs>", ".")
    return probe.read


def _mentioned(text: str, key: str) -> bool:
    return f"`{key}`" in text


def test_every_static_context_key_is_documented():
    text = (DOCS / "static-context.md").read_text(encoding="utf-8")
    missing = sorted(k for k in KNOWN_KEYS if not _mentioned(text, k))
    assert not missing, f"docs/static-context.md does not mention {missing}"


@pytest.mark.parametrize("list_key, entry", [
    ("logs", {"path": "app.log"}),
    ("ranks", {"rank": 0, "node": "node-01"}),
    ("metrics", {"path": "metrics.csv"}),
    ("flight_recorder", {"path": "fr/_dump_0"}),
])
def test_every_sub_key_of_a_static_context_entry_is_documented(list_key, entry):
    read = _entry_keys_read(list_key, entry)
    # the probe must see the lookups (a validator that copies the entry first would make this test vacuous)
    assert set(entry) <= read, f"{list_key}: the validator read {sorted(read)}; the probe no longer sees its lookups"
    text = (DOCS / "static-context.md").read_text(encoding="utf-8")
    missing = sorted(k for k in read if not _mentioned(text, k))
    assert not missing, f"docs/static-context.md does not mention the {list_key} entry key(s) {missing}"


# ------------------------------------------------------------------------------------------------ configuration


def _sections() -> dict[str, type]:
    """Section name -> settings dataclass, read from the fields of `Config`."""
    out = {}
    for f in dataclasses.fields(Config):
        default = getattr(Config(), f.name)
        if dataclasses.is_dataclass(default):
            out[f.name] = type(default)
    return out


def _free_tables() -> list[str]:
    """`Config` fields that are free-form tables (`[plugins.NAME]`)."""
    return [f.name for f in dataclasses.fields(Config) if isinstance(getattr(Config(), f.name), dict)]


def _inherited(cls: type) -> set[str]:
    """Fields a settings class gets from a dataclass it derives from (documented once, for every section using it)."""
    names: set[str] = set()
    for base in cls.__mro__[1:]:
        if dataclasses.is_dataclass(base):
            names |= {f.name for f in dataclasses.fields(base)}
    return names


def _toml_literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def _doc_tables(text: str) -> dict[str, dict[str, list[str]]]:
    """Heading -> {first-cell key -> cells} of the markdown tables under it."""
    tables: dict[str, dict[str, list[str]]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            continue
        if line.startswith("|") and not set(line) <= set("|-: "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            key = re.fullmatch(r"`([^`]+)`", cells[0])
            if key:
                tables.setdefault(heading, {})[key.group(1)] = cells
    return tables


def test_every_config_section_and_key_is_documented():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    problems = []
    for name, cls in _sections().items():
        if f"`[{name}]`" not in text:
            problems.append(f"section [{name}]")
        problems += [f"[{name}] {f.name}" for f in dataclasses.fields(cls) if not _mentioned(text, f.name)]
    problems += [f"[{name}.NAME]" for name in _free_tables() if f"[{name}." not in text]
    assert not problems, "docs/configuration.md does not document: " + ", ".join(problems)


def test_the_documented_config_defaults_are_the_code_defaults():
    tables = _doc_tables((DOCS / "configuration.md").read_text(encoding="utf-8"))
    problems = []
    for name, cls in _sections().items():
        own = tables.get(f"`[{name}]`", {})
        shared = {k: v for h, rows in tables.items() if not h.startswith("`[") for k, v in rows.items()}
        inherited = _inherited(cls)
        for f in dataclasses.fields(cls):
            row = own.get(f.name) or (shared.get(f.name) if f.name in inherited else None)
            if row is None or len(row) < 3:
                problems.append(f"[{name}] {f.name}: no table row with its default")
                continue
            shown = re.match(r"\s*`([^`]*)`", row[2])
            want = _toml_literal(getattr(cls(), f.name))
            if shown is None or shown.group(1) != want:
                problems.append(f"[{name}] {f.name}: documented default {row[2]!r}, the code's is {want}")
    assert not problems, "docs/configuration.md: " + "; ".join(problems)


def test_the_example_config_sets_every_key_to_its_default_and_loads():
    path = ROOT / "firstfault" / "firstfault.example.toml"
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    problems = []
    for name, cls in _sections().items():
        table = doc.get(name)
        if not isinstance(table, dict):
            problems.append(f"no [{name}] table")
            continue
        problems += [f"[{name}] has no {f.name}" for f in dataclasses.fields(cls) if f.name not in table]
    text = path.read_text(encoding="utf-8")
    problems += [f"no [{name}.NAME] example" for name in _free_tables() if f"[{name}." not in text]
    assert not problems, f"{path}: " + ", ".join(problems)
    assert load_config(str(path)) == Config(), "the example's values are not the defaults of firstfault.config"


def test_config_sections_are_read_from_the_config_dataclasses():
    # the mapping the loader uses and the one this test derives from `Config` must agree, or the tests above miss keys
    loader_sections = getattr(config_module, "SECTIONS", None)
    if loader_sections is None:
        pytest.skip("firstfault.config has no SECTIONS mapping")
    assert _sections() == loader_sections


# ------------------------------------------------------------------------------------------------ citations


@cache
def _repo_files() -> tuple[Path, ...]:
    """Files of the repository: tracked, plus new files not ignored (not yet committed)."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = (ROOT / p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)
    return tuple(sorted(f for f in files if f.is_file()))


def _text_files() -> list[tuple[Path, str]]:
    out = []
    for path in _repo_files():
        if path == THIS_FILE or path.stat().st_size > 2_000_000:
            continue
        try:
            out.append((path, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:  # binary fixtures (flight-recorder dumps)
            continue
    return out


def _where(path: Path, text: str, pos: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, pos) + 1}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors, seen = set(), {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = _slug(line.lstrip("#"))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_markdown_link_resolves():
    problems = []
    for path, text in _text_files():
        if path.suffix != ".md":
            continue
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#") and not target[1:]:
                continue  # http(s), mailto, ...
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            if not resolved.exists() or ROOT not in resolved.parents and resolved != ROOT:
                problems.append(f"{_where(path, text, m.start())}: {target} does not exist")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                problems.append(f"{_where(path, text, m.start())}: {target}: no heading with anchor #{anchor}")
    assert not problems, "broken links:\n" + "\n".join(problems)


MD_NAME = re.compile(r"(?<![\w/.:-])((?:\.\./|\./)?[\w./-]*[\w-]\.md)\b")  # not inside URLs


def _resolves(path: Path, mention: str, basenames: set[str]) -> bool:
    if "/" not in mention.strip("./"):
        return Path(mention).name in basenames
    for base in (path.parent, ROOT):
        candidate = (base / mention).resolve()
        if candidate.is_file() and ROOT in candidate.parents:
            return True
    return False


# Reference documents this repository does not contain; citing them, with or without `.md`, sends a reader nowhere.
_MISSING_DOCUMENTS = [
    r"\bCONTR" r"ACTS\b",
    r"\blog-for" r"mats?\b",
    r"\blog-format refer" r"ence\b",
    r"\battribution-" r"ideas\b",
    r"\bschedulers-and-" r"telemetry\b",
    r"\bstack-" r"notes\b",
    r"\bslurm-local-" r"cluster\b",
    r"\bprometheus-test-" r"server\b",
    r"\.\./" r"shared\b",
]


def _citation_problems() -> list[str]:
    basenames = {p.name for p in _repo_files()}
    missing = re.compile("|".join(f"(?:{p})" for p in _MISSING_DOCUMENTS))
    problems = []
    for path, text in _text_files():
        for m in MD_NAME.finditer(text):
            if not _resolves(path, m.group(1), basenames):
                problems.append(f"{_where(path, text, m.start())}: cites {m.group(1)}, which is not in the repository")
        for m in missing.finditer(text):
            problems.append(f"{_where(path, text, m.start())}: cites {m.group(0)!r}, a document that is not in the repository")
    return sorted(set(problems))


def test_the_docs_cite_only_documents_of_the_repository():
    problems = [p for p in _citation_problems() if p.startswith(("docs/", "README.md"))]
    assert not problems, "\n".join(problems)


def test_no_file_cites_a_document_that_is_not_in_the_repository():
    """Code comments and docstrings included."""
    problems = _citation_problems()
    assert not problems, f"{len(problems)} citation(s) of missing documents:\n" + "\n".join(problems)


def _section_numbers(path: Path) -> set[str]:
    numbers = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#+\s+(\d+(?:\.\d+)*)\.?\s", line)
        if m:
            numbers.add(m.group(1))
    return numbers


def test_design_section_citations_exist():
    sections = _section_numbers(DOCS / "DESIGN.md")
    cite = re.compile(r"\bDESIGN(?:\.md)?\)?\s*§\s*(\d+(?:\.\d+)*)")
    problems = [f"{_where(path, text, m.start())}: DESIGN §{m.group(1)} does not exist"
                for path, text in _text_files() for m in cite.finditer(text) if m.group(1) not in sections]
    assert not problems, "\n".join(problems)


def test_readme_section_citations_exist():
    headings = {line.lstrip("#").strip().lower() for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("#")}
    cite = re.compile(r"\bREADME(?:\.md)?'?s?\s+\"([^\"]+)\"")
    problems = [f"{_where(path, text, m.start())}: README has no section {m.group(1)!r}"
                for path, text in _text_files() for m in cite.finditer(text)
                if not any(h.startswith(m.group(1).lower()) for h in headings)]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------------ shape of the docs


def test_the_readme_is_a_short_guide_that_links_every_docs_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DOCS.iterdir() if p.is_file() and p.name != "README.md")
    assert [p for p in pages if f"]({p})" not in index] == [], "docs/README.md does not list every page"


_HISTORY = re.compile(r"(?i)\bissue #\d+|\bre-?measured\b|\bprevious measurement\b|\bbefore (?:this|the) (?:change|session)\b"
                      r"|\bthis session\b|\bstop \d+\b")


def test_the_docs_state_current_facts_without_development_history():
    problems = []
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        problems += [f"{_where(path, text, m.start())}: {m.group(0)!r}" for m in _HISTORY.finditer(text)]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------------ examples run


def _sh_blocks(text: str) -> list[tuple[int, str]]:
    """(line, text) of every ```sh block."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in re.finditer(r"^```sh\n(.*?)^```", text, re.S | re.M)]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory):
    """A folder after the README's demo command (`firstfault demo --dir firstfault-demo`), copied for each page."""
    import sys

    folder = tmp_path_factory.mktemp("docs-demo")
    subprocess.run([str(Path(sys.executable).with_name("firstfault")), "-q", "demo", "--dir", "firstfault-demo"],
                   cwd=folder, check=True, capture_output=True, timeout=900)
    return folder


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md") if _sh_blocks(p.read_text(encoding="utf-8"))))
def test_every_sh_block_of_a_docs_page_runs_as_written(page, demo_folder, tmp_path):
    """The page's `sh` blocks in order, each as one bash script (errors and failed pipes stop it), in a fresh folder
    after the demo, with the package's commands on PATH and a home of its own; 8080 becomes a free port. A block that
    cannot run here (a synopsis, other hosts, a live Kubernetes) is a `console` block on its page, shown, not run."""
    import os
    import shutil
    import signal
    import sys

    folder = tmp_path / "here"
    shutil.copytree(demo_folder, folder, symlinks=True)
    (tmp_path / "home").mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name, content in re.findall(r"^`([^`\s]+)`:\n\n```\w*\n(.*?)^```", (DOCS / page).read_text(encoding="utf-8"),
                                    re.S | re.M):  # the files a page shows, as `path`: and a block, are written first
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content, encoding="utf-8")
    port = str(_free_port())
    for line, block in _sh_blocks((DOCS / page).read_text(encoding="utf-8")):
        script = tmp_path / f"block-{line}.sh"
        script.write_text("set -eo pipefail\n" + block.replace("8080", port))
        out = tmp_path / f"block-{line}.out"
        with out.open("w") as sink:
            proc = subprocess.Popen(["bash", str(script)], cwd=folder, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=900)
            finally:
                try:  # what the block left running (a server it started and did not stop)
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        assert code == 0, f"docs/{page}:{line}: the block exited {code}:\n{out.read_text()[-3000:]}"
