"""The folder put first on a run's PYTHONPATH is the one that holds gpuscope's sitecustomize
(a moved module once pointed it at a folder that does not exist, and no process was injected)."""

from __future__ import annotations

import os
import subprocess
import sys

from gpuscope import rundir
from tests.inject.conftest import injected_env


def test_boot_folder_holds_the_hook():
    boot = rundir.boot_dir()
    assert os.path.isfile(os.path.join(boot, "sitecustomize.py")), boot
    assert rundir.pythonpath_with_boot("/a:/b").split(os.pathsep) == [boot, "/a", "/b"]


def test_a_python_started_with_the_boot_folder_loads_the_hook(tmp_path):
    env = dict(os.environ, PYTHONPATH=rundir.pythonpath_with_boot(None), GPUSCOPE_RUN_DIR=str(tmp_path))
    env.pop("GPUSCOPE_RUN_ID", None)
    code = "import sys; print('_gpuscope_inject.hook' in sys.modules, sys.path[0] != " + repr(rundir.boot_dir()) + ")"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
    assert not (tmp_path / "inject-errors.log").exists(), (tmp_path / "inject-errors.log").read_text()


def test_the_files_a_process_writes_in_the_run_folder_are_private_from_the_start(tmp_path):
    """Under the usual umask (022) the event log, the stacks file and their folders are
    0600 / 0700 as the process makes them, not only after the run's end walks the folder."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    env = injected_env(run_dir)
    code = "import nvtx\nwith nvtx.annotate('step'):\n    pass\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         preexec_fn=lambda: os.umask(0o022))
    assert out.returncode == 0, out.stderr[-2000:]
    made = {(p.suffix or p.name): oct(p.stat().st_mode & 0o777) for p in run_dir.rglob("*")}
    assert {"events", "stacks", ".log", ".dump"} <= set(made), made   # (.ranges when ranges were packed)
    assert all(mode == ("0o700" if kind in ("events", "stacks") else "0o600") for kind, mode in made.items()), made


MODULE_ATTRS = """
import importlib.util, sys
names = sorted(n for n in sys.modules if n == "_gpuscope_inject" or n.startswith("_gpuscope_inject."))
differ = []
for name in names:
    module = sys.modules[name]
    made = importlib.util.module_from_spec(module.__spec__)   # what an import would have made of its spec
    for attr in ("__name__", "__loader__", "__package__", "__spec__", "__path__", "__file__", "__cached__"):
        if getattr(module, attr, "missing") != getattr(made, attr, "missing"):
            differ.append((name, attr))
print(len(names), differ)
"""


def test_the_modules_the_hook_loads_itself_are_what_an_import_makes_of_their_specs(tmp_path):
    """The start modules skip ``module_from_spec`` (~0.3 ms a process): their attributes are still
    the ones it gives, ``__cached__`` naming gpuscope's code cache."""
    env = injected_env(tmp_path)
    out = subprocess.run([sys.executable, "-c", MODULE_ATTRS], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    count, differ = out.stdout.split(" ", 1)
    assert int(count) >= 9 and differ.strip() == "[]", out.stdout
    probe = "import sys; print(sys.modules['_gpuscope_inject.hook'].__cached__)"
    cached = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                            timeout=120).stdout.strip()
    assert "__pycache__" not in cached and cached.endswith(".pyc"), cached
    assert os.path.basename(cached).startswith("hook."), cached
