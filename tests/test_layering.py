"""The layering rules of docs/dev/CODEMAP.md, as checks that fail when the code breaks them.

- the import-linter contracts in pyproject.toml (`lint-imports`): Qt only in gpuscope.app, the core
  never imports the app, gpuscope.inject imports nothing of gpuscope and no third-party package;
- no import cycle among gpuscope's modules (imports under ``TYPE_CHECKING`` do not count);
- gpuscope.inject imports only the standard library at module level (nvtx and torch lazily, inside
  functions), because it runs inside the user's processes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
INJECT = ROOT / "gpuscope" / "inject"


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout and proc.stdout.count("KEPT") >= 4, proc.stdout[-2000:]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    graph = grimp.build_graph("gpuscope", exclude_type_checking_imports=True)
    assert len(graph.modules) > 50  # the graph really covers the package
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    """The check above can fail: a graph with a cycle is reported."""
    graph = grimp.ImportGraph()
    for name in ("p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def _top_level_imports(path: Path) -> set[str]:
    """Top-level package names imported at module level (not inside functions or classes)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif isinstance(node, (ast.If, ast.Try)):   # guarded imports still run at import time
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return names


def test_inject_imports_only_the_standard_library_at_module_level():
    files = sorted(INJECT.rglob("*.py"))
    assert len(files) >= 5
    offenders = {}
    for path in files:
        foreign = {n for n in _top_level_imports(path)
                   if n not in sys.stdlib_module_names and n not in ("__future__", "_gpuscope_inject")}
        if foreign:
            offenders[str(path.relative_to(ROOT))] = sorted(foreign)
    assert offenders == {}


def test_qt_contract_names_every_module_but_the_app():
    """The Qt contract lists its sources by hand: a new top-level package must be added to it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if "Qt" in c["name"])
    top = {p.stem if p.suffix == ".py" else p.name for p in (ROOT / "gpuscope").iterdir()
           if (p.suffix == ".py" or (p / "__init__.py").is_file()) and p.name != "__init__.py"}
    assert {m.removeprefix("gpuscope.") for m in contract["source_modules"]} == top - {"app"}
