"""Damaged inputs get one clear line, never an internal error, never a hang.

Seeded mutations (byte flips, zeroed pages, pages of noise, truncation, a garbled header) of a real
nsys 2022.4 export, of a real ``gpuscope run --nsys`` run folder (any one of its files: the export,
event logs, range files, spec, summary) and of a job folder of node runs, each opened the way
``gpuscope report --json`` and the app open them (``fuzz_worker.py``, in a child process, both
read paths of an export). The parent sees a line before and after every case, so a case that does
not finish within ``CASE_TIMEOUT_S`` is a hang; a sample of the export's mutations, and of the
``.nsys-rep`` it came from (which ``nsys export`` reads), go through the CLI itself.
"""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuscope.nsys import locate
from tests.nsys_versions import NEWEST

HERE = Path(__file__).resolve().parent
WORKER = HERE / "fuzz_worker.py"
CASE_TIMEOUT_S = 60     # a case takes well under a second; a minute without its end line is a hang
CLI_SAMPLE = 12
REP_SAMPLE = 8


def fuzz(kind: str, source: Path, work: Path, seed: int, count: int, env: dict) -> dict[str, list[str]]:
    """Run ``count`` cases in a child; {"ok", "refused", "internal", "hang"} -> lines."""
    work.mkdir(parents=True, exist_ok=True)
    # stderr apart: numpy's warnings about garbage values are noise, not a case's outcome
    errors = open(work / "stderr.txt", "w+")   # closed in the finally below
    proc = subprocess.Popen([sys.executable, str(WORKER), kind, str(source), str(work), str(seed), str(count)],
                            stdout=subprocess.PIPE, stderr=errors, text=True, env=env,
                            cwd=str(HERE.parent.parent))
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    out: dict[str, list[str]] = {"ok": [], "refused": [], "internal": [], "hang": [], "other": []}
    started = None
    try:
        while True:
            try:
                line = lines.get(timeout=CASE_TIMEOUT_S)
            except queue.Empty:
                out["hang"].append(started or "before the first case")
                break
            if line is None:
                break
            word = line.split(" ", 1)[0]
            if word == "start":
                started = line
            else:
                out[word if word in out else "other"].append(f"{started} -> {line}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        errors.seek(0)
        stderr = errors.read()
        errors.close()
    assert proc.returncode == 0 or out["hang"], (out["other"][-5:], stderr[-3000:])
    assert "Traceback" not in stderr, stderr[-3000:]
    return out


def _check(out: dict[str, list[str]], count: int, refusals: bool = True) -> None:
    assert not out["hang"], f"a case did not finish within {CASE_TIMEOUT_S} s: {out['hang']}"
    assert not out["internal"], "\n".join(out["internal"][:10])
    assert not out["other"], out["other"][:5]
    assert len(out["ok"]) + len(out["refused"]) == count
    if refusals:
        assert out["refused"], "no mutation was refused: the fuzz did not damage anything that matters"


@pytest.fixture(scope="module")
def export22(recordings) -> Path:
    return recordings.get("2022.4", "spawn")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A real run: ``gpuscope run --nsys`` of a spawn Pool(2) with NVTX ranges (newest nsys)."""
    inst = locate.provisioned_installs().get(NEWEST)
    if inst is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
        pytest.skip("Nsight Systems is not provisioned (run scripts/provision_nsys.py)")
    home = tmp_path_factory.mktemp("fuzz_home")
    env = dict(os.environ, GPUSCOPE_HOME=str(home), GPUSCOPE_NSYS=str(inst.nsys))
    env.pop("PYTHONPATH", None)
    res = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--json", "--nsys", "--nsys-trace", "nvtx",
                          str(HERE / "scripts" / "pool_script.py"), "spawn", "--features"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.stdout.strip(), res.stderr[-2000:]
    result = json.loads(res.stdout.splitlines()[-1])
    assert result["nsys"]["ok"], result["nsys"]
    run_dir = Path(result["run_dir"])
    assert (run_dir / "report.sqlite").is_file() and list((run_dir / "events").glob("*.log"))
    return run_dir


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ, GPUSCOPE_HOME=str(tmp_path / "home"))
    env.pop("PYTHONPATH", None)
    env.pop("GPUSCOPE_NO_COMPILED", None)
    return env


@pytest.mark.nsys
def test_damaged_exports(export22, tmp_path):
    out = fuzz("export", export22, tmp_path / "work", seed=3405, count=300, env=_env(tmp_path))
    _check(out, 300)
    assert out["ok"], "every mutation was refused: the fuzz never reached the readers"


@pytest.mark.nsys
def test_damaged_run_folders(run_folder, tmp_path):
    out = fuzz("run", run_folder, tmp_path / "work", seed=3406, count=250, env=_env(tmp_path))
    _check(out, 250)
    assert out["ok"]


@pytest.mark.nsys
def test_damaged_run_folders_without_an_export(run_folder, tmp_path):
    """The same run read from gpuscope's own event logs alone (a run without nsys, or one whose
    export is not written yet): damaged logs are read as far as they go, never an internal error."""
    events_only = tmp_path / "run"
    shutil.copytree(run_folder, events_only)
    for export in events_only.glob("report.*"):
        export.unlink()
    out = fuzz("run", events_only, tmp_path / "work", seed=3410, count=120, env=_env(tmp_path))
    _check(out, 120, refusals=False)
    assert out["ok"]


def test_damaged_job_folders(tmp_path):
    from tests.runs.jobfolder import make_job

    job = make_job(tmp_path / "job", nnodes=2, nproc=2, steps=40)
    out = fuzz("job", job, tmp_path / "work", seed=3407, count=150, env=_env(tmp_path))
    _check(out, 150)
    assert out["ok"]


def _cli_cases(source: Path, suffix: str, count: int, seed: int, tmp_path: Path) -> None:
    """``gpuscope report --json`` itself: exit 0 with a JSON object, or exit 2 with one line."""
    sys.path.insert(0, str(HERE))
    from fuzz_worker import mutate

    rng = random.Random(seed)
    data = source.read_bytes()
    env = _env(tmp_path)
    seen = set()
    for case in range(count):
        bad, how = mutate(data, rng)
        path = tmp_path / f"cli{case}{suffix}"
        path.write_bytes(bad)
        res = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--json", "--no-cache", str(path)],
                             env=env, capture_output=True, text=True, timeout=CASE_TIMEOUT_S)
        assert res.returncode in (0, 2), (how, res.returncode, res.stderr[-1000:])
        if res.returncode == 0:
            assert json.loads(res.stdout)["path"] == str(path)
        else:
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("gpuscope: error: "), (how, res.stderr)
            assert str(path) in lines[0], lines[0]   # the line names the file
        seen.add(res.returncode)
        path.unlink()
        path.with_suffix(".sqlite").unlink(missing_ok=True)   # a .nsys-rep's export beside it
    shutil.rmtree(tmp_path / "home", ignore_errors=True)
    assert 2 in seen, "no CLI case was refused"


@pytest.mark.nsys
def test_damaged_exports_through_the_cli(export22, tmp_path):
    _cli_cases(export22, ".sqlite", CLI_SAMPLE, 3408, tmp_path)


@pytest.mark.nsys
def test_damaged_nsys_reps_through_the_cli(export22, tmp_path):
    """A damaged ``.nsys-rep``: nsys export refuses it (one line with its reason) or reads it."""
    _cli_cases(export22.with_suffix(".nsys-rep"), ".nsys-rep", REP_SAMPLE, 3409, tmp_path)
