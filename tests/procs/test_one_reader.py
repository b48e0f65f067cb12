"""Outside gpuscope/procs/ no module opens /proc (the hook's one exception: inject/procself.py).

The check reads every module's syntax tree: a string constant (or the first part of an f-string)
that starts with ``/proc`` is a path into /proc; docstrings and comments are text, not paths.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpuscope

PACKAGE = Path(gpuscope.__file__).parent
SERVICE = "procs/"                 # the process service
HOOK_READER = "inject/procself.py"  # the injected hook's one /proc/self module (it cannot import gpuscope)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def proc_paths(source: str) -> list[int]:
    """Line numbers of the /proc paths in ``source``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("/proc"):
                lines.append(node.lineno)
                skip.add(id(first))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and node.value.startswith("/proc"):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_process_service_opens_proc():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(SERVICE) or rel == HOOK_READER:
            continue
        offenders += [f"{rel}:{line}" for line in proc_paths(path.read_text(encoding="utf-8"))]
    assert offenders == [], "read /proc through gpuscope.procs: " + ", ".join(offenders)


def test_the_check_sees_each_form_of_a_proc_path():
    source = '''"""Reads /proc/stat (a docstring: text)."""
import os
# open("/proc/x") in a comment
a = open("/proc/self/status")
b = os.listdir(f"/proc/{a}/fd")
c = "/proc"
d = "not /proc"
'''
    assert proc_paths(source) == [4, 5, 6]


def test_the_allowed_places_exist():
    assert (PACKAGE / SERVICE).is_dir() and (PACKAGE / HOOK_READER).is_file()
