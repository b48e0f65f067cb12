"""What the injection costs every Python process at start (docs/INJECTION.md, issue 14.5), checked
by what it loads, not by timing: an injected ``python -c`` imports no standard library module a
plain one does not (beyond ``atexit`` and ``faulthandler``, both built in), the wrappers of
multiprocessing and nvtx load only when the program imports those, and the compiled copy of the
injected code is per interpreter version, safe when many processes create it at once, and never
stale. ``_dumps`` (the event log's JSON without importing json) writes what ``json.dumps`` writes."""

from __future__ import annotations

import glob
import json
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope import rundir
from gpuscope.inject.eventlog import _dumps
from tests.inject.conftest import injected_env as _env

MODULES = "import sys; print(' '.join(sorted(sys.modules)))"


def _modules(env: dict[str, str], code: str = MODULES, python: str = sys.executable) -> set[str]:
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(out.stdout.split())


def _no_errors(run_dir: Path) -> None:
    log = run_dir / "inject-errors.log"
    assert not log.exists(), log.read_text()


def test_an_injected_start_loads_no_standard_library_module_a_plain_one_does_not(tmp_path):
    # this virtualenv's Python (its site already imports much), and a bare CPython when there is one
    other = _other_python()
    for python in [sys.executable, *([other] if other else [])]:
        plain = _modules({k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}, python=python)
        injected = _modules(_env(tmp_path), python=python)
        _no_errors(tmp_path)
        ours = {m for m in injected if m == "_gpuscope_inject" or m.startswith("_gpuscope_inject.")}
        assert "_gpuscope_inject.hook" in ours
        # json, threading, signal, array, resource, types, importlib.util/abc came with the hook
        assert injected - plain - ours == {"sitecustomize", "atexit", "faulthandler"}, (python, injected - plain - ours)
        # the wrappers of what this process never imports stay unloaded
        assert not ours & {"_gpuscope_inject.mpwrap", "_gpuscope_inject.nvtxwrap", "_gpuscope_inject.torchmem"}


@pytest.mark.parametrize("code", ["pass", "import multiprocessing.reduction", "import multiprocessing.spawn",
                                  "import multiprocessing.pool, concurrent.futures.process", "import nvtx"])
def test_the_wrappers_load_no_standard_library_module_the_program_did_not(tmp_path, bare_python, code):
    # what the program imports fires the wrappers (post-import callbacks, a spawn child's start):
    # they bring nothing of their own (importlib and the warnings it imports cost ~2 ms, functools ~4 ms)
    plain = _modules({k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}, f"{code}; {MODULES}",
                     python=bare_python)
    injected = _modules(_env(tmp_path), f"{code}; {MODULES}", python=bare_python)
    _no_errors(tmp_path)
    ours = {m for m in injected if m.startswith("_gpuscope_inject")}
    assert "_gpuscope_inject.hook" in ours
    extra = injected - plain - ours
    assert "sitecustomize" in extra and extra <= {"sitecustomize", "atexit", "faulthandler"}, extra


def test_what_a_process_needs_at_start_comes_without_the_import_systems_search(tmp_path):
    # -X importtime lists every module the import system loads: the hook's own modules (and the
    # multiprocessing wrappers of a spawn child, whose command imports multiprocessing.spawn) come
    # straight from gpuscope's code cache instead (the boot's _Finder.load); the wrappers loaded
    # later, by what the program imports, come through the import system (its lock)
    for code, spawn_role in (("pass", False), ("import multiprocessing.spawn", True)):
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"{code}; {MODULES}"], env=_env(tmp_path),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        _no_errors(tmp_path)
        ours = {m for m in out.stdout.split() if m.startswith("_gpuscope_inject")}
        assert {"_gpuscope_inject.hook", "_gpuscope_inject.stacks"} <= ours
        assert ("_gpuscope_inject.mpwrap" in ours) is spawn_role
        assert ("_gpuscope_inject.pickwatch" in ours) is spawn_role   # multiprocessing.reduction's
        assert "_gpuscope_inject.annotate_patterns" not in ours    # only with --annotate
        searched = [line for line in out.stderr.splitlines() if "_gpuscope_inject" in line]
        assert searched == [], searched


def test_the_wrappers_load_when_the_program_imports_what_they_wrap(tmp_path):
    code = ("import multiprocessing.pool, sys, concurrent.futures.process as p; "
            "print(' '.join(sorted(sys.modules)), "
            "getattr(multiprocessing.pool.Pool.__init__, '__wrapped__', None) is not None or "
            "any(getattr(getattr(multiprocessing.pool, n, None), '__wrapped__', None) "
            "for n in dir(multiprocessing.pool)))")
    mods = _modules(_env(tmp_path), code)
    _no_errors(tmp_path)
    assert "_gpuscope_inject.mpwrap" in mods and "True" in mods


def _cache_files(cache: Path) -> list[str]:
    return sorted(os.path.relpath(p, cache) for p in glob.glob(str(cache / "*" / "*")))


def test_the_compiled_copy_is_made_once_by_many_processes_at_once_and_per_python_version(tmp_path):
    cache = tmp_path / "cache"
    env = _env(tmp_path / "run", GPUSCOPE_INJECT_CACHE=str(cache), PYTHONDONTWRITEBYTECODE="1")
    procs = [subprocess.Popen([sys.executable, "-c", "print('ok')"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(12)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 12, [e[-500:] for _, e in outs]
    assert [o for o, _ in outs] == ["ok\n"] * 12
    _no_errors(tmp_path / "run")
    files = _cache_files(cache)
    tag = sys.implementation.cache_tag
    assert files and all(f.endswith(f".{tag}.pyc") for f in files), files     # no *.tmp left behind
    assert {os.path.basename(f).split(".")[0] for f in files} >= {"__init__", "hook", "eventlog", "stacks"}
    stamps = {f: os.stat(cache / f).st_mtime_ns for f in files}
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=120)
    assert {f: os.stat(cache / f).st_mtime_ns for f in files} == stamps      # read, not written again
    other = _other_python()
    if other is not None:   # another CPython: its own files beside these, these untouched
        subprocess.run([other, "-c", "pass"], env=env, check=True, timeout=120)
        _no_errors(tmp_path / "run")
        assert len(_cache_files(cache)) == 2 * len(files)
        assert {f: os.stat(cache / f).st_mtime_ns for f in files} == stamps


def _other_python() -> str | None:
    mine = "%d.%d" % sys.version_info[:2]
    for version in ("3.12", "3.11", "3.13", "3.10"):
        if version == mine:
            continue
        for found in [*sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}"))),
                      shutil.which(f"python{version}")]:
            if found and subprocess.run([found, "-c", "pass"], capture_output=True, timeout=60).returncode == 0:
                return found
    return None


# what a process reads of the copied package: procname.MARK, which the tests add to its source
PROBE_MARK = "import sys; print(getattr(sys.modules['_gpuscope_inject.procname'], 'MARK', None))"


def _copied_package(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of the injection package with its own code cache, and the variables that inject it."""
    pkg = tmp_path / "inject"
    shutil.copytree(Path(rundir.boot_dir()).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    env = _env(tmp_path / "run", boot=str(pkg / "boot"), GPUSCOPE_INJECT_CACHE=str(cache),
               PYTHONDONTWRITEBYTECODE="1")
    return pkg, cache, env


def test_a_changed_or_damaged_source_copy_is_compiled_again(tmp_path):
    pkg, cache, env = _copied_package(tmp_path)
    assert _modules(env, PROBE_MARK) == {"None"}
    with open(pkg / "procname.py", "a") as fh:
        fh.write("\nMARK = 'changed'\n")
    assert _modules(env, PROBE_MARK) == {"changed"}
    for f in glob.glob(str(cache / "*" / "procname.*.pyc")):
        Path(f).write_bytes(b"not a code cache")
    assert _modules(env, PROBE_MARK) == {"changed"}
    _no_errors(tmp_path / "run")


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2 ** 70, 1.5, 0.1, 1e300, float("nan"), float("inf"), -float("inf"),
    "plain", 'a "quote"', "back\\slash", "nl\n tab\t cr\r \b \f \x00 \x1f \x7f", "é 漢字", "\U0001F600",
    "\udcff (surrogateescape)", [1, "a", None, [2.5, []]], (1, 2),
    {"a": 1, 2: "b", 1.5: None, True: 3, None: 4, "nested": {"x": [1, {"y": "z"}]}},
    {"obj": Path("/p"), "argv": ["python", "-c", "print('hi')\n"]}, {}, [],
])
def test_dumps_writes_what_json_dumps_writes(value):
    assert _dumps(value, default=str) == json.dumps(value, default=str)


def test_the_stub_keeps_its_own_byte_code_where_python_writes_none(tmp_path):
    """Under PYTHONDONTWRITEBYTECODE every start compiled sitecustomize.py (a process's first
    compile costs 2-5 ms): the stub writes its .pyc once, per interpreter version, and the next
    start loads it (``python -v`` says "code object from" the .pyc); a changed stub is compiled
    and written again."""
    pkg = tmp_path / "inject"
    shutil.copytree(Path(rundir.boot_dir()).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = _env(tmp_path / "run", boot=str(pkg / "boot"), GPUSCOPE_INJECT_CACHE=str(tmp_path / "cache"),
               PYTHONDONTWRITEBYTECODE="1")
    other = _other_python()
    for python in [sys.executable, *([other] if other else [])]:
        tag = subprocess.run([python, "-c", "import sys; print(sys.implementation.cache_tag)"], capture_output=True,
                             text=True, check=True).stdout.strip()
        pyc = pkg / "boot" / "__pycache__" / f"sitecustomize.{tag}.pyc"
        first = subprocess.run([python, "-v", "-c", "pass"], env=env, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0 and pyc.is_file() and f"code object from '{pyc}'" not in first.stderr
        second = subprocess.run([python, "-v", "-c", "pass"], env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0 and f"code object from '{pyc}'" in second.stderr, second.stderr[-3000:]
        assert not list(pyc.parent.glob("*.tmp"))
        _no_errors(tmp_path / "run")
    stub = pkg / "boot" / "sitecustomize.py"
    stub.write_text(stub.read_text() + "\nMARK_CHANGED = True\n")
    probe = "import sitecustomize; print(getattr(sitecustomize, 'MARK_CHANGED', False))"
    assert _modules(env, probe) == {"True"} and _modules(env, probe) == {"True"}


def test_the_start_modules_come_from_one_file_made_from_the_sources_as_they_are(tmp_path):
    """The modules every process loads at start are read from one cache file (start.<tag>.pyc),
    not one file each; a changed source, a damaged or foreign start file are never used (the
    modules' own cache files are, and the start file is written again)."""
    pkg, cache, env = _copied_package(tmp_path)
    assert _modules(env, PROBE_MARK) == {"None"}
    tag = sys.implementation.cache_tag
    start = next(cache.glob(f"*/start.{tag}.pyc"))
    # the start file alone serves them: the modules' own files may go (a process reads none of them)
    for f in start.parent.glob(f"*.{tag}.pyc"):
        if f != start:
            f.write_bytes(b"not a code cache")
    assert _modules(env, PROBE_MARK) == {"None"}
    assert (start.parent / f"procname.{tag}.pyc").read_bytes() == b"not a code cache"
    # a changed source: the start file is stale, the module is compiled again and the start file rewritten
    with open(pkg / "procname.py", "a") as fh:
        fh.write("\nMARK = 'changed'\n")
    assert _modules(env, PROBE_MARK) == {"changed"}
    made = start.read_bytes()
    assert _modules(env, PROBE_MARK) == {"changed"} and start.read_bytes() == made     # read, not written
    # a damaged start file, or one of another Python (other magic): not used, written again
    for bad in (b"garbage", made[:4] + b"\x00" * 20, b"\x00\x00\x00\x00" + made[4:]):
        start.write_bytes(bad)
        assert _modules(env, PROBE_MARK) == {"changed"}
        assert marshal.loads(start.read_bytes()[4:]) == marshal.loads(made[4:])   # the same stamp and code
    _no_errors(tmp_path / "run")


NVTX_ASKED_FOR = """\
import json, multiprocessing as mp, sys

def loaded(_):
    return "nvtx" in sys.modules

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(1) as pool:
        worker = pool.map(loaded, [0])[0]
    import nvtx
    print(json.dumps([worker, sorted(m for m in ("email", "importlib.metadata", "zipfile") if m in sys.modules)]))
"""


def test_nvtx_is_imported_only_by_the_program_or_for_a_tool_and_costs_no_metadata_import(tmp_path, run_env):
    """Without an NVTX tool attached (no ``NVTX_INJECTION64_PATH``), a pool worker's task range goes
    to the event log only: gpuscope imports no nvtx there (10-40 ms a worker); a program that imports
    nvtx gets its version recorded, read without ``importlib.metadata`` (email, zipfile: 30 ms)."""
    from importlib.metadata import version

    from tests.runs.helpers import gpuscope, summary

    path = tmp_path / "nvtx_asked_for.py"
    path.write_text(NVTX_ASKED_FOR)
    env = {k: v for k, v in run_env.items() if not k.startswith("NVTX_INJECTION")}
    proc = gpuscope("run", "--json", str(path), env=env)
    result = summary(proc)
    assert result["status"] == "exited", proc.stderr.decode()[-2000:]
    assert json.loads(proc.stdout.decode().splitlines()[0]) == [False, []]
    main = next(p for p in result["processes"] if p["role"] == "main")
    worker = next(p for p in result["processes"] if p["role"] == "pool worker")
    assert main["info"]["nvtx"] == version("nvtx") and worker["ranges"] == 1
