"""House rules no linter checks: the code map names what exists, no standard-library stand-ins,
no figures or issue numbers in code comments (docs/ holds them)."""

from __future__ import annotations

import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpuscope"
CODEMAP = ROOT / "docs" / "dev" / "CODEMAP.md"

# Dotted module names (gpuscope.x.y) and paths (gpuscope/x/y.py, x/y.py under a package) in the map.
_DOTTED = re.compile(r"`(gpuscope(?:\.[a-z_0-9]+)+)")
_PATH = re.compile(r"`((?:gpuscope/|tests/|docs/|scripts/|benchmarks/)[A-Za-z0-9_./-]+)`")
_FIGURE = re.compile(r"\d(?:[\d.])* ?(?:ms|µs|us)\b|issue \d+(?:\.\d+)?")


def _exists_as_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return True
    # ``gpuscope.module.name``: a name inside a module file is fine when the file exists.
    return path.parent.with_suffix(".py").is_file()


def codemap_missing() -> list[str]:
    text = CODEMAP.read_text(encoding="utf-8")
    missing = [m for m in sorted(set(_DOTTED.findall(text))) if not _exists_as_module(m)]
    for rel in sorted(set(_PATH.findall(text))):
        if not (ROOT / rel.rstrip("/")).exists():
            missing.append(rel)
    return missing


def test_codemap_names_only_what_exists() -> None:
    assert codemap_missing() == []


def test_codemap_check_can_fail(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "CODEMAP.md"
    fake.write_text("`gpuscope.no_such_module` and `gpuscope/nowhere.py`\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "CODEMAP", fake)
    assert codemap_missing() == ["gpuscope.no_such_module", "gpuscope/nowhere.py"]


def test_no_standard_library_stand_ins() -> None:
    gone = ["record.py", "choices.py", "jsontext.py", "threads.py", "cimport.py", "store/sqlite.py"]
    assert [name for name in gone if (PACKAGE / name).exists()] == []
    idiom = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
             if "TYPE_CHECKING = False" in p.read_text(encoding="utf-8")]
    assert idiom == []


def comments_with_figures(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``file:line`` of each comment that carries a measurement or an issue number."""
    found = []
    for path in paths:
        with path.open("rb") as fh:
            for tok in tokenize.tokenize(fh.readline):
                if tok.type == tokenize.COMMENT and _FIGURE.search(tok.string):
                    found.append(f"{path.relative_to(root)}:{tok.start[0]}")
    return found


def test_comments_say_why_without_figures() -> None:
    paths = [p for p in PACKAGE.rglob("*.py") if "boot" not in p.parts]
    assert comments_with_figures(paths) == []


def test_figure_check_can_fail(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("x = 1  # costs 12 ms on the runner\ny = 2  # see issue 14.4\nz = 3  # plain\n")
    assert comments_with_figures([sample], tmp_path) == ["sample.py:1", "sample.py:2"]


MAIN_WINDOW = PACKAGE / "app" / "qt_main_window.py"
_WINDOW_ARGS = {"window", "main_window", "mainwindow", "win"}


def window_holders(files: list[Path]) -> list[str]:
    """Classes whose constructor takes the main window (by name or annotation)."""
    import ast

    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                    for arg in fn.args.args + fn.args.kwonlyargs:
                        note = ast.unparse(arg.annotation) if arg.annotation else ""
                        if arg.arg.lower() in _WINDOW_ARGS or "MainWindow" in note:
                            found.append(f"{path.name}: {node.name}({arg.arg})")
    return found


def test_the_main_window_lays_out_and_nothing_holds_it() -> None:
    assert len(MAIN_WINDOW.read_text(encoding="utf-8").splitlines()) <= 250
    assert window_holders(sorted((PACKAGE / "app").rglob("*.py"))) == []


def test_window_holder_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "holder.py"
    bad.write_text("class Driver:\n    def __init__(self, window: 'MainWindow', args):\n        pass\n")
    assert window_holders([bad]) == ["holder.py: Driver(window)"]


def undocumented_dataclasses(files: list[Path], root: Path = ROOT) -> list[str]:
    """``file: Class`` of each ``@dataclass`` without a docstring (docs/dev/CODEMAP.md, "Records":
    dataclasses then writes one itself with ``inspect.signature``, on every import)."""
    import ast

    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or ast.get_docstring(node) is not None:
                continue
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if ast.unparse(target).split(".")[-1] == "dataclass":
                    found.append(f"{path.relative_to(root)}: {node.name}")
    return found


def test_every_dataclass_has_a_docstring() -> None:
    assert undocumented_dataclasses(sorted(PACKAGE.rglob("*.py"))) == []


def test_docstring_check_can_fail(tmp_path: Path) -> None:
    sample = tmp_path / "records.py"
    sample.write_text("import dataclasses\nfrom dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass A:\n"
                      "    x: int\n\n@dataclasses.dataclass\nclass B:\n    '''Said.'''\n    y: int\n\n"
                      "@dataclasses.dataclass\nclass C:\n    z: int\n")
    assert undocumented_dataclasses([sample], tmp_path) == ["records.py: A", "records.py: C"]
