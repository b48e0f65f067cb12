"""Measure how often the provisioned nsys builds fail on their own, without gpuscope.

    python -m tests.nsys_read.measure_flaky [--runs N] [--versions 2022.4,2024.2] [--out FILE]

Each attempt records ``pool_script.py spawn`` with plain ``nsys profile --trace=nvtx,osrt``
(the flags gpuscope uses), imports a left-over ``.qdstrm`` with QdstrmImporter, exports SQLite,
and counts NVTX ranges. No gpuscope code takes part in the recording, so a failure here is
nsys's own. Attempts hold gpuscope's machine-wide nsys lock, as the tests do. One JSON line per
attempt; a summary (failures by kind, per version) at the end. The test helpers retry only the
kinds of failure this measured (tests/flaky.py says which, with the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nsysrec import PYTHON, SCRIPT, TAG, find_installs, kill_tagged

from gpuscope.nsys.lock import NsysLock

HANG_S = 300.0   # a step still running after this counts as hung (a loaded machine is slow)


def _step(cmd: list, cwd: Path, env: dict | None = None) -> tuple[str, int | None, str]:
    """(outcome, rc, output tail) of one nsys step; outcome "ok", "exit" or "hang"."""
    full = dict(os.environ, **(env or {}))
    full[TAG] = "1"
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=cwd, env=full, start_new_session=True, text=True, errors="replace")
    try:
        out, _ = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "hang", None, out[-400:]
    return ("ok" if proc.returncode == 0 else "exit"), proc.returncode, out[-400:]


def attempt(inst, folder: Path) -> dict:
    """One plain recording; the kind of failure (or "ok") and the facts behind it."""
    base = folder / "rec"
    t0 = time.monotonic()
    res: dict = {"version": inst.key}
    outcome, rc, log = _step([inst.nsys, "profile", "--trace=nvtx,osrt", "--sample=none", "--cpuctxsw=none",
                              "-o", base, "-f", "true", PYTHON, SCRIPT, "spawn"], folder)
    res["agent_lost"] = "Connection to Agent lost" in log
    if outcome != "ok":
        return dict(res, kind=f"profile-{outcome}", rc=rc, log=log, s=round(time.monotonic() - t0, 1))
    qdstrm, rep = base.with_suffix(".qdstrm"), base.with_suffix(".nsys-rep")
    if qdstrm.exists():
        rep.unlink(missing_ok=True)
        outcome, rc, log = _step([inst.importer, "-i", qdstrm], folder, {"LD_LIBRARY_PATH": inst.ld_path})
        if outcome != "ok" or not rep.exists():
            kind = "import-analysisfailed" if "AnalysisFailed" in log else f"import-{outcome}"
            return dict(res, kind=kind, rc=rc, log=log, s=round(time.monotonic() - t0, 1))
    if not rep.exists():
        return dict(res, kind="no-report", log=log, s=round(time.monotonic() - t0, 1))
    sqlite = base.with_suffix(".sqlite")
    outcome, rc, log = _step([inst.nsys, "export", "--type", "sqlite", "-f", "true", "-o", sqlite, rep], folder)
    if outcome != "ok":
        return dict(res, kind=f"export-{outcome}", rc=rc, log=log, s=round(time.monotonic() - t0, 1))
    ranges = _count(sqlite, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59")
    osrt = _count(sqlite, "SELECT count(*) FROM OSRT_API")
    kind = "ok" if ranges else ("nothing-recorded" if not osrt else "no-nvtx-ranges")
    return dict(res, kind=kind, ranges=ranges, osrt=osrt, s=round(time.monotonic() - t0, 1))


def _count(sqlite: Path, sql: str) -> int:
    conn = sqlite3.connect(sqlite)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=8, help="attempts per version (alternated)")
    ap.add_argument("--versions", default="2022.4,2023.4,2024.2")
    ap.add_argument("--out", type=Path, default=None, help="also append JSON lines here")
    args = ap.parse_args(argv)
    installs = find_installs()
    keys = [k for k in args.versions.split(",") if k in installs]
    results = []
    for i in range(args.runs):
        for key in keys:
            with tempfile.TemporaryDirectory(prefix="nsysflaky") as tmp, NsysLock():
                try:
                    res = attempt(installs[key], Path(tmp))
                finally:
                    kill_tagged()
            res["i"] = i
            results.append(res)
            line = json.dumps(res)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(line + "\n")
    for key in keys:
        kinds = Counter(r["kind"] for r in results if r["version"] == key)
        print(f"nsys {key}: {sum(kinds.values())} attempts: {dict(kinds)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
