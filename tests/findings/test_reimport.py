"""The hook times the re-import of __main__ in spawn children and the forkserver (U lines), and
`spawn-main-reimport` names the slow imports when they dominate the time to the first task."""

from __future__ import annotations

from pathlib import Path

from gpuscope.fix import SetForkserverPreload
from gpuscope.findings.engine import analyse_run
from tests.runs.helpers import gpuscope, summary

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _run(script: str, method: str, run_env: dict[str, str], *flags: str) -> tuple[Path, list]:
    proc = gpuscope("run", "--json", "-q", *flags, str(SCRIPTS / script), method, env=run_env, timeout=240)
    assert proc.returncode == 0, proc.stderr.decode()
    folder = Path(summary(proc)["run_dir"])
    from gpuscope.trace.events import read_run_events

    return folder, read_run_events(folder)


def test_spawn_workers_reimporting_numpy_get_the_finding(run_env):
    folder, events = _run("reimport_heavy.py", "spawn", run_env)
    workers = [pe for pe in events if pe.role == "pool worker"]
    assert len(workers) == 2 and all(pe.main_reimport is not None for pe in workers)
    for pe in workers:
        t0, t1, info = pe.main_reimport
        assert info["main"].endswith("reimport_heavy.py") and info["modules"][0][0] == "numpy"
        assert 0 < info["modules"][0][1] <= t1 - t0           # numpy's time is part of the re-import
    main = next(pe for pe in events if pe.role == "main")
    assert main.main_reimport is None                      # the program's own first import is not one
    found_all = analyse_run(folder)
    codes = [f.code for f in found_all]
    (found,) = [f for f in found_all if f.code == "spawn-main-reimport"]
    assert "numpy" in found.title and found.evidence.excerpts[0].startswith("numpy: ")
    assert "set_forkserver_preload([\"numpy\"])" in found.fix and "__main__" in found.fix
    assert found.action == SetForkserverPreload(("numpy",))
    assert found.evidence.number("re-import ms") >= 50
    assert "startup-dominated" not in codes          # the same workers' slow start: one finding, one fix


def test_a_script_without_heavy_imports_gets_no_finding(run_env):
    folder, events = _run("reimport_light.py", "spawn", run_env)
    workers = [pe for pe in events if pe.role == "pool worker"]
    assert workers and all(pe.main_reimport is not None for pe in workers)    # measured all the same
    assert all(not pe.main_reimport[2]["modules"] for pe in workers)        # and nothing of its own
    assert "spawn-main-reimport" not in [f.code for f in analyse_run(folder)]


def test_under_forkserver_the_finding_names_the_preload(run_env):
    """CPython 3.11's forkserver does not preload __main__ (it passes no main_path to its server):
    each child re-imports it; where a server does, its own log has the one U line."""
    folder, events = _run("reimport_heavy.py", "forkserver", run_env)
    timed = [pe for pe in events if pe.main_reimport is not None]
    assert timed and {pe.role for pe in timed} <= {"forkserver", "pool worker"}
    assert all(pe.main_reimport[2]["modules"][0][0] == "numpy" for pe in timed)
    (found,) = [f for f in analyse_run(folder) if f.code == "spawn-main-reimport"]
    assert "forkserver child(ren)" in found.title and found.action == SetForkserverPreload(("numpy",))


def test_the_preload_fix_takes_the_imports_out_of_the_workers_start(run_env):
    """SetForkserverPreload's fix applied (`gpuscope run --forkserver-preload numpy`, which the launch
    panel's forkserver_preload field sets; the hook adds them to the preload list): the server imports
    numpy once; the workers' re-import finds it loaded."""
    folder, events = _run("reimport_heavy.py", "forkserver", run_env, "--forkserver-preload", "numpy")
    timed = [pe for pe in events if pe.main_reimport is not None]
    assert timed and all(pe.main_reimport[2]["modules"] == [] for pe in timed)
    assert "spawn-main-reimport" not in [f.code for f in analyse_run(folder)]
