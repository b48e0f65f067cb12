"""gpuscope/cimport.py: ``_sqlite3`` and ``array`` without ``functools`` and ``collections`` (issue
14.4), on every interpreter this machine has (3.10-3.13)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from tests.fresh_python import REPO, fresh_json

HEAVY = ["functools", "collections", "collections.abc", "types", "operator", "reprlib", "keyword"]

PROBE = """
import sys
heavy = %r
from gpuscope.store.sqlite import sqlite3
from gpuscope.cimport import array
loaded = [m for m in heavy if m in sys.modules]
stand_ins_left = [m for m in heavy if m in sys.modules and not getattr(sys.modules[m], "__file__", None)]
# the statement cache: more distinct statements than it holds, each run several times
c = sqlite3.connect(":memory:", cached_statements=8)
c.execute("create table t(a)")
for i in range(400):
    c.execute("insert into t values (?)", (i %% 50,))
    c.execute("select count(*) from t where a = %%d" %% (i %% 20)).fetchone()
rows = c.execute("select count(*), sum(a) from t").fetchone()
c.row_factory = sqlite3.Row
named = dict(c.execute("select 1 as one").fetchone())
import functools, collections.abc, json
print(json.dumps({
    "loaded": loaded, "stand_ins_left": stand_ins_left, "rows": list(rows), "named": named,
    "real_functools": hasattr(functools, "reduce") and hasattr(functools, "partial"),
    "array_is_a_sequence": isinstance(array("d", [1.0]), collections.abc.MutableSequence),
    "array_is_the_module_type": array is __import__("array").array,
    "same_sqlite": sqlite3.Connection is __import__("sqlite3").Connection,
}))
""" % (HEAVY,)


def _interpreters() -> list[str]:
    found = [sys.executable]
    for version in ("3.10", "3.11", "3.12", "3.13"):
        found += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))[-1:]
    return found


@pytest.mark.parametrize("python", _interpreters())
def test_sqlite3_and_array_come_without_functools_and_collections(python):
    out = subprocess.run([python, "-S", "-c", PROBE], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == [] and got["stand_ins_left"] == []
    assert got["rows"] == [400, sum(i % 50 for i in range(400))] and got["named"] == {"one": 1}
    assert got["real_functools"] and got["array_is_a_sequence"] and got["array_is_the_module_type"]
    assert got["same_sqlite"]


def test_stand_ins_are_not_used_while_another_thread_may_import():
    """A LeanThread running: the C module is imported as usual (functools comes with it)."""
    code = ("import sys, time\n"
            "from gpuscope import threads, cimport\n"
            "t = threads.LeanThread(time.sleep, (0.5,)); t.start()\n"
            "cimport.sqlite3()\n"
            "t.join()\n"
            "import json\n"
            "print(json.dumps(['functools' in sys.modules, getattr(sys.modules.get('functools'), '__file__', None) is not None]))\n")
    assert fresh_json(code, bare=True) == [sys.version_info >= (3, 11)] * 2


def test_a_stand_in_is_never_left_in_sys_modules_when_the_import_fails():
    import types

    from gpuscope import cimport

    assert "functools" in sys.modules   # here it is: load() imports as usual
    before = dict(sys.modules)
    with pytest.raises(ImportError):
        cimport.load("gpuscope_no_such_c_module", {"functools": lambda: types.ModuleType("functools")})
    assert sys.modules["functools"] is before["functools"]


def test_a_stand_in_is_taken_out_after_a_failed_import_in_a_fresh_interpreter():
    code = ("import sys, types\n"
            "from gpuscope import cimport\n"
            "try:\n"
            "    cimport.load('gpuscope_no_such_c_module', {'functools': lambda: types.ModuleType('functools')})\n"
            "except ImportError:\n"
            "    pass\n"
            "loaded = 'functools' in sys.modules\n"
            "import json\n"
            "print(json.dumps(loaded))\n")
    assert fresh_json(code, bare=True) is False
