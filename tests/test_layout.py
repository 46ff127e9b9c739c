"""The package's layout holds: no import cycles, imports at module level (lazy only where start-up needs it and a
comment says so), stage code in its stage folder, only warehouse/ opens the warehouse, and `attribute` loads no
orchestration or web stack it does not use."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from firstfault.synthetic.demo import write_demo

REPO = Path(__file__).resolve().parents[1]
# folder -> package, as pyproject.toml maps them
PACKAGES = {"firstfault": "firstfault", "connectors": "firstfault.connectors", "transforms": "firstfault.transforms",
            "warehouse": "firstfault.warehouse", "rules_sql": "firstfault.rules_sql", "synthetic": "firstfault.synthetic",
            "flows": "firstfault.flows"}
# `firstfault --help` and the start of every command must not pay for polars, DuckDB or Prefect: the CLI imports a
# command's modules in its handler
LAZY_BY_DESIGN = {"firstfault/cli.py"}
LAZY_MARK = "imported on use"


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def _imported(module: str, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            base = ".".join(module.split(".")[:-node.level] + ([base] if base else []))
        names = [base] + [f"{base}.{a.name}" for a in node.names]
    return {n for n in names if n in known and n != "firstfault"}


def _graph() -> dict[str, set[str]]:
    known = _modules()
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] = set().union(*[_imported(module, n, known) for n in ast.walk(tree)
                                      if isinstance(n, (ast.Import, ast.ImportFrom))] or [set()])
    return graph


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_imports_sit_at_module_level_unless_marked_lazy():
    lazy = []
    for path in _modules().values():
        rel = path.relative_to(REPO).as_posix()
        if rel in LAZY_BY_DESIGN:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    around = " ".join(lines[max(0, node.lineno - 3):node.lineno])
                    if LAZY_MARK not in around:
                        lazy.append(f"{rel}:{node.lineno}")
    assert not lazy, f"imports inside functions without a '# {LAZY_MARK}: why' comment: {lazy}"


def _python_lines(folder: Path) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in folder.glob("*.py"))


def test_the_shell_and_kernel_stay_small():
    total = sum(_python_lines(REPO / f) for f in PACKAGES)
    assert _python_lines(REPO / "firstfault") <= 0.25 * total


def test_only_the_warehouse_package_opens_the_warehouse():
    opens = []
    for module, path in _modules().items():
        if module.startswith("firstfault.warehouse"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                in_memory_duckdb = name == "connect" and not node.args and not node.keywords
                if name in {"connect_reader", "connect_writer"} or (name == "connect" and not in_memory_duckdb):
                    opens.append(f"{path.relative_to(REPO)}:{node.lineno} {name}")
    assert not opens, opens


def test_attribute_imports_no_prefect_dask_or_fastapi(tmp_path):
    spec = next(p for p in write_demo(tmp_path / "demo") if "headline" in str(p))
    probe = (
        "import sys\n"
        "from firstfault.cli import main\n"
        f"code = main(['attribute', '--static', {str(spec)!r}, '--lake', {str(tmp_path / 'lake')!r},"
        f" '--warehouse', {str(tmp_path / 'w.duckdb')!r}])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'dask', 'distributed', 'fastapi', 'uvicorn'})\n"
        "print('LOADED', ','.join(heavy))\n"
        "sys.exit(code)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = [line for line in done.stdout.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED "], loaded


@pytest.mark.parametrize("folder", ["connectors", "transforms", "rules_sql", "warehouse", "synthetic", "flows"])
def test_stage_folders_hold_no_copies_of_the_kernel(folder):
    # the schemas live in firstfault/schema.py only: a stage module that defines a table schema of its own drifts
    for path in (REPO / folder).glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                   for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        assert not {n for n in defined if n.endswith("_SCHEMA") and not n.startswith("_")}, path
