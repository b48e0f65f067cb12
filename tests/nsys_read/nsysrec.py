"""Helpers for the nsys reader tests: provisioned nsys versions, real recordings, stats output.

Recordings are made once per test session (``nsys profile`` -> ``QdstrmImporter`` when nsys left a
``.qdstrm`` -> ``nsys export --type sqlite``), kept small (NVTX only, a Pool(2) script). Every nsys
command runs in its own session with a per-test-session tag in its environment; afterwards any
``nsys`` process still carrying that tag (the ``--start-agent`` daemon a killed profile leaves
behind) is killed by pid.

When no nsys is provisioned the nsys tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "scripts" / "pool_script.py"
PYTHON = sys.executable
TAG = f"gpuscope-nsys-read-{uuid.uuid4().hex[:12]}"
from tests.nsys_versions import VERSIONS  # noqa: E402 - oldest and newest unless GPUSCOPE_TEST_ALL_NSYS=1
MARKER = "gpuscope-nsys.json"
from gpuscope.nsys.lock import LOCK_PATH as LOCK  # noqa: E402 - shared by everything that runs `nsys profile`
from tests.flaky import known_flake, note_retry  # noqa: E402


@dataclass(frozen=True)
class Install:
    key: str            # "2022.4"
    version: str        # "2022.4.2.1"
    nsys: Path
    importer: Path
    ld_path: str

    @property
    def generation(self) -> int:
        return 2022 if self.key.startswith("2022") else 2023

    def report_name(self, new: str) -> str:
        """A stats report's name in this version (2022.4 used the old names)."""
        old = {"nvtx_sum": "nvtxsum", "osrt_sum": "osrtsum", "cuda_gpu_kern_sum": "gpukernsum",
               "cuda_api_sum": "cudaapisum", "cuda_gpu_mem_time_sum": "gpumemtimesum"}
        return old[new] if self.generation == 2022 else new


def _roots() -> list[Path]:
    from gpuscope import paths

    roots = [paths.cache_dir() / "nsys"]
    extra = os.environ.get("GPUSCOPE_TEST_NSYS_DEST")
    if extra:
        roots.insert(0, Path(extra))
    return roots


def find_installs() -> dict[str, Install]:
    """Provisioned nsys versions, keyed "2022.4" etc., from the provisioner's marker files."""
    found: dict[str, Install] = {}
    for root in _roots():
        for key in VERSIONS:
            marker = root / key / MARKER
            if key in found or not marker.is_file():
                continue
            meta = json.loads(marker.read_text())
            base = root / key
            nsys, importer = base / meta["nsys"], base / meta["importer"]
            if nsys.is_file():
                ld = ":".join(str(base / p) for p in meta.get("ld_library_path", []))
                found[key] = Install(key, meta.get("nsys_version", key), nsys, importer, ld)
    return found


def require_installs(keys=VERSIONS) -> dict[str, Install]:
    found = find_installs()
    missing = [k for k in keys if k not in found]
    if missing:
        msg = f"Nsight Systems {', '.join(missing)} not provisioned (scripts/provision_nsys.py)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return {k: found[k] for k in keys}


# --------------------------------------------------------------------------- running nsys

def _tagged_nsys_pids() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
        if TAG.encode() in env and state != "Z":
            out.append(int(entry.name))
    return out


def kill_tagged() -> int:
    """Kill processes (nsys agents) started by this test session's nsys commands; return how many."""
    n = 0
    for pid in _tagged_nsys_pids():
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            n += 1
        except ProcessLookupError:
            pass
    return n


class NsysFlake(AssertionError):  # noqa: N818 - a flake, not an error of the code under test
    """An nsys step failed in a way nsys fails on its own (tests/flaky.py): worth one more try."""


def run_nsys(cmd: list, timeout: float = 300, env: dict | None = None, cwd: Path | None = None) -> str:
    """Run an nsys step in its own session; kill the session on timeout; return stdout+stderr.
    A hang, a crash of the tool or a known nsys failure raises NsysFlake, any other failure
    AssertionError: the programs recorded here carry no gpuscope code (plain nsys)."""
    full = dict(os.environ, **(env or {}))
    full[TAG] = "1"
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            encoding="utf-8", errors="replace", env=full, cwd=cwd, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        kill_tagged()
        raise NsysFlake(f"{Path(str(cmd[0])).name} {cmd[1]} hung: still running after {timeout:.0f} s") from None
    if proc.returncode != 0:
        known = known_flake(out)
        if proc.returncode < 0:   # the tool itself crashed (seen: 2024.2's importer, SIGSEGV after saving)
            known = f"{Path(str(cmd[0])).name} died by signal {-proc.returncode}"
        what = f"exit {proc.returncode}: {' '.join(map(str, cmd))}\n{out[-2000:]}"
        raise NsysFlake(f"{known}; {what}") if known else AssertionError(what)
    return out


def record(inst: Install, out_dir: Path, name: str, script_args: list[str], *, trace: str = "nvtx",
           nsys_args: list[str] = (), env: dict | None = None, program: list | None = None) -> Path:
    """Profile ``pool_script.py`` (or ``program``) under ``inst``; return the SQLite export's path.

    Each attempt holds the machine-wide lock (``LOCK``): two nsys sessions profiling at once were
    seen to mix their data. Up to three attempts, but only a step that failed the way nsys fails
    on its own (a hang, or a failure tests/flaky.py knows) is run again, and each retry is reported
    (tests/flaky.py). Anything else fails at once; so does an export without NVTX ranges.
    """
    import fcntl

    for attempt in range(1, 4):
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                sqlite = _record_once(inst, out_dir, name, script_args, trace, nsys_args, env, program)
            except NsysFlake as exc:
                if attempt == 3:
                    raise AssertionError(f"no recording after 3 attempts, nsys failing each time: {exc}") from exc
                note_retry(f"nsys {inst.key} recording '{name}' (attempt {attempt})", str(exc).split("\n")[0])
                continue
        assert _has_ranges(sqlite), f"{sqlite} has no NVTX ranges"
        return sqlite
    raise AssertionError("unreachable")


def _has_ranges(sqlite: Path) -> bool:
    import sqlite3

    conn = sqlite3.connect(sqlite)
    try:
        return bool(conn.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59").fetchone()[0])
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def _record_once(inst: Install, out_dir: Path, name: str, script_args: list[str], trace: str,
                 nsys_args, env: dict | None, program: list | None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    program = program or [PYTHON, SCRIPT, *script_args]
    base = out_dir / name
    try:
        log = run_nsys([inst.nsys, "profile", f"--trace={trace}", "--sample=none", "--cpuctxsw=none",
                        *nsys_args, "-o", base, "-f", "true", *program],
                       env=env, cwd=out_dir)
        rep = base.with_suffix(".nsys-rep")
        qdstrm = base.with_suffix(".qdstrm")
        if qdstrm.exists():   # nsys could not import it itself (Debian splits the importer off)
            rep.unlink(missing_ok=True)
            run_nsys([inst.importer, "-i", qdstrm], env={"LD_LIBRARY_PATH": inst.ld_path}, cwd=out_dir)
            qdstrm.unlink()
        assert rep.exists(), f"no {rep.name}:\n{log[-1500:]}"
        (out_dir / f"{name}.log").write_text(log)
        sqlite = base.with_suffix(".sqlite")
        run_nsys([inst.nsys, "export", "--type", "sqlite", "-f", "true", "-o", sqlite, rep], cwd=out_dir)
        return sqlite
    finally:
        kill_tagged()


def stats_csv(inst: Install, sqlite: Path, report: str) -> list[dict]:
    """``nsys stats --report <report> --format csv`` rows as dicts (empty when the report skips)."""
    out = run_nsys([inst.nsys, "stats", "--report", inst.report_name(report), "--format", "csv",
                    "--output", "-", sqlite], cwd=sqlite.parent)
    chatter = ("Processing [", "SKIPPED", "NOTICE", "WARNING")
    lines = [ln for ln in out.splitlines() if ln and not ln.startswith(chatter)]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"Time') or ln.startswith("Time")), None)
    if start is None:
        return []
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
