"""Support for the timeline/report/cleanup Qt tests: a real spawn Pool(2) workload recorded with
``gpuscope run`` (and optionally nsys), and a synthetic large Timeline built through the real class.

The workload script is written to a temporary folder; nothing here fakes gpuscope's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from gpuscope.trace import timeline as T
from tests.cleanup.util import state_of

PY = sys.executable

WORKLOAD = r'''
"""A parent, a helper thread and a Pool(2): nested NVTX ranges in several colours."""
import multiprocessing as mp
import threading
import time

import nvtx


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def load_batch(i):
    with nvtx.annotate("load_batch", color="purple"):
        with nvtx.annotate("read", color="cyan"):
            spin(0.004)
        with nvtx.annotate("decode", color="yellow"):
            spin(0.006)
            with nvtx.annotate("resize", color="orange"):
                spin(0.002)
    return i


def init(barrier):
    barrier.wait(timeout=60)


def logger():
    for _ in range(4):
        with nvtx.annotate("write_log", color="darkgreen"):
            spin(0.003)
        time.sleep(0.01)


def main():
    t = threading.Thread(target=logger, name="logger")
    t.start()
    ctx = mp.get_context()   # the start method gpuscope run --start-method chose
    with nvtx.annotate("setup", color="blue"):
        pool = ctx.Pool(2, initializer=init, initargs=(ctx.Barrier(2),))
    nvtx.mark("pool ready", color="red")
    for epoch in range(2):
        with nvtx.annotate("epoch", color="blue"):
            res = pool.map_async(load_batch, range(8), chunksize=1)
            for step in range(3):
                with nvtx.annotate("step", color="green"):
                    with nvtx.annotate("forward", color="orange"):
                        spin(0.006)
                    with nvtx.annotate("backward", color="red"):
                        spin(0.008)
            res.get(timeout=60)
    pool.close()
    pool.join()
    t.join()
    print("done", flush=True)


if __name__ == "__main__":
    main()
'''


# What WORKLOAD does, counted from its text (an expectation independent of gpuscope's reader):
# 2 epochs x (3 steps of forward+backward, 8 pool tasks of load_batch>read,decode>resize, each
# wrapped by gpuscope's task range), setup once, 4 log writes on the logger thread, 1 mark.
EPOCHS, STEPS, TASKS, LOG_WRITES = 2, 3, 8, 4
MAIN_NVTX = {"setup": 1, "epoch": EPOCHS, "step": EPOCHS * STEPS, "forward": EPOCHS * STEPS,
             "backward": EPOCHS * STEPS, "write_log": LOG_WRITES}
WORKER_NVTX = {name: EPOCHS * TASKS for name in ("load_batch", "read", "decode", "resize", "gpuscope:load_batch")}
WORKLOAD_NVTX = {**MAIN_NVTX, **WORKER_NVTX}


def write_workload(folder: Path) -> Path:
    path = folder / "pool_workload.py"
    path.write_text(WORKLOAD, encoding="utf-8")
    return path


# Runs a command as a child subreaper: whatever the command orphans (nsys helpers, pool workers) is
# adopted and reaped here, and anything still alive 10 s after the command ends is SIGKILLed.
# (PID 1 of these containers does not reap, so orphans would stay as zombies.)
UNDER_SUBREAPER = r'''
import ctypes, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
rc = subprocess.call(sys.argv[1:])

def children():
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out

end = time.monotonic() + 10
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        break
    if time.monotonic() > end:
        for pid in children():
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.05)
sys.exit(rc)
'''


def gpuscope_run(script: Path, *extra: str, home: Path | None = None, method: str = "spawn",
                 timeout: float = 180, check: bool = True) -> dict:
    """``python -m gpuscope run --json --start-method METHOD [extra] SCRIPT``: its JSON summary
    (with ``check``, asserted to have exited 0)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if home is not None:
        env["GPUSCOPE_HOME"] = str(home)
    proc = subprocess.run([PY, "-c", UNDER_SUBREAPER, PY, "-m", "gpuscope", "run", "--json", "--quiet",
                           "--start-method", method, *extra, str(script)],
                          env=env, capture_output=True, timeout=timeout)
    last = proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode()
    try:
        summary = json.loads(last)
    except ValueError as exc:
        raise AssertionError(f"gpuscope run gave no summary: {proc.stdout!r} {proc.stderr!r}") from exc
    assert not check or summary["exit_code"] == 0, (summary, proc.stderr)
    return summary


def nsys_run(script: Path, *extra: str, home: Path, method: str = "spawn", tries: int = 2) -> dict:
    """``gpuscope run --nsys`` with a usable report. The run is made again (reported through
    tests/flaky.py) only when nsys's own output shows a failure nsys has without gpuscope (lost
    agent, importer analysis failure); any other failure fails the test at once."""
    from gpuscope.nsys.report import load_report
    from tests.flaky import known_flake, note_retry

    for attempt in range(1, tries + 1):
        run = gpuscope_run(script, "--nsys", *extra, home=home, method=method, timeout=300, check=False)
        rdir = Path(run["run_dir"])
        usable = run["status"] == "exited" and (rdir / "report.sqlite").exists()
        flake = None if usable else known_flake(_nsys_output(rdir) + str(run.get("nsys")))
        if flake and attempt < tries:
            note_retry(f"gpuscope run --nsys (attempt {attempt})", flake)
            continue
        assert usable and run["exit_code"] == 0, (run["status"], run["exit_code"], run.get("nsys"), run["notes"])
        assert (rdir / "report.nsys-rep").exists(), sorted(p.name for p in rdir.iterdir())
        findings = [getattr(f, "code", "") for f in load_report(rdir, use_cache=False).findings]
        assert "nothing-recorded" not in findings, findings
        return run
    raise AssertionError("unreachable")


def _nsys_output(run_dir: Path) -> str:
    """What nsys and its tools printed in a run folder (program output and nsys-<step>.log), and
    the run's recorded error (where gpuscope's hang guard says it stopped a hung nsys)."""
    names = ["stdout.log", "stderr.log", *sorted(p.name for p in run_dir.glob("nsys-*.log"))]
    said = "".join((run_dir / n).read_text(errors="replace") for n in names if (run_dir / n).is_file())
    try:
        error = json.loads((run_dir / "summary.json").read_text()).get("error") or ""
    except (OSError, ValueError, AttributeError):
        error = ""
    return said + str(error)


def gpuscope_report_json(target: str) -> dict:
    """``python -m gpuscope report --json TARGET``."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([PY, "-m", "gpuscope", "report", "--json", target], env=env,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def nsys_stats_nvtx(rep: Path, sqlite: Path | None = None) -> dict[str, int]:
    """{range: instances} from ``nsys stats --report nvtx_sum`` (nvtxsum in 2022) on ``rep``'s
    SQLite export, run with the nsys release that wrote ``rep``: Nsight Systems' own count."""
    import csv
    import io

    from gpuscope.nsys.lock import NsysLock
    from gpuscope.nsys.rep_export import pick_nsys, rep_version

    sqlite = sqlite or rep.with_suffix(".sqlite")
    inst = pick_nsys(rep_version(rep))
    name = "nvtxsum" if inst.version.startswith("2022") else "nvtx_sum"
    with NsysLock():
        proc = subprocess.run([str(inst.nsys), "stats", "--report", name, "--format", "csv", "--output", "-",
                               str(sqlite)], env=inst.tool_env(), capture_output=True, text=True, timeout=180,
                              start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip('"').startswith("Time"))
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    return {r["Range"]: int(r["Instances"]) for r in rows if r.get("Range")}


def save_shot(widget, name: str, tmp_path: Path) -> Path:
    """grab() to the folder GPUSCOPE_SCREENSHOTS names (docs/screenshots), else to tmp."""
    folder = Path(os.environ.get("GPUSCOPE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()   # pending layout requests first
    assert widget.grab().save(str(path))
    return path


def nsys_available() -> bool:
    from gpuscope.nsys import locate

    try:
        return bool(locate.list_installs())
    except Exception:  # noqa: BLE001 - any failure to locate means "not provisioned"
        return False


# --------------------------------------------------------------------------- synthetic timeline

def synthetic_timeline(n_ranges: int = 1_000_000, n_procs: int = 4, threads: int = 2,
                       seed: int = 7) -> T.Timeline:
    """``n_ranges`` nested NVTX ranges (3 levels: outer ⊃ 10 mid ⊃ 4 inner) on ``n_procs × threads``
    thread lanes, built through the real Timeline classes (depths by ``compute_depths``)."""
    rng = np.random.default_rng(seed)
    tl = T.Timeline()
    names = [tl.strings.intern(n) for n in ("iteration", "step", "kernel_launch", "memcpy", "sync")]
    lanes = n_procs * threads
    per_outer = 1 + 10 + 40
    n_outer = max(1, n_ranges // (lanes * per_outer))
    parts = []
    for lane in range(lanes):
        pid, tid = 1000 + lane // threads, 1000 + lane // threads + (lane % threads) * 7
        dur_outer = rng.integers(400_000, 1_200_000, n_outer)
        gaps = rng.integers(1_000, 50_000, n_outer)
        o_start = np.cumsum(np.r_[0, (dur_outer + gaps)[:-1]]) + lane * 3_000
        s, e, d, nm = [o_start], [o_start + dur_outer], [np.zeros(n_outer)], [np.full(n_outer, names[0])]
        mid_len = dur_outer // 10
        m_start = (o_start[:, None] + np.arange(10)[None, :] * mid_len[:, None]).ravel()
        m_end = m_start + np.repeat(mid_len * 9 // 10, 10)
        s.append(m_start)
        e.append(m_end)
        d.append(np.ones(len(m_start)))
        nm.append(np.full(len(m_start), names[1]))
        in_len = (m_end - m_start) // 4
        i_start = (m_start[:, None] + np.arange(4)[None, :] * in_len[:, None]).ravel()
        i_end = i_start + np.repeat(in_len * 3 // 4, 4)
        s.append(i_start)
        e.append(i_end)
        d.append(np.full(len(i_start), 2))
        nm += [np.array(names[2:])[rng.integers(0, 3, len(i_start))]]
        start, end = np.concatenate(s), np.concatenate(e)
        k = len(start)
        parts.append(T.Ranges(
            start_ns=start.astype(np.int64), end_ns=end.astype(np.int64), pid=np.full(k, pid, np.int32),
            tid=np.full(k, tid, np.int32), depth=np.zeros(k, np.int16),
            name_id=np.concatenate(nm).astype(np.int32), color=np.zeros(k, np.uint32),
            domain_id=np.zeros(k, np.int32), category=np.zeros(k, np.int32),
            style=np.zeros(k, np.uint8), source=np.zeros(k, np.uint8), flags=np.zeros(k, np.uint8),
            end_tid=np.full(k, -1, np.int32)))
    tl.ranges = T.Ranges.concat(parts)
    T.compute_depths(tl.ranges)
    pids = np.unique(tl.ranges.pid)
    tl.processes = T.Processes(pid=pids.astype(np.int32),
                               name_id=np.array([tl.strings.intern(f"rank {i}") for i in range(len(pids))],
                                                np.int32),
                               source=np.full(len(pids), 1, np.uint8))
    tl.duration_ns = int(tl.ranges.end_ns.max())
    return tl


# --------------------------------------------------------------------------- cleanup scenarios

LEFTOVER = r'''
"""Leaves a setsid sleeper behind (double fork, stdio on /dev/null) and writes its pid to argv[1]."""
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for i in (0, 1, 2):
            os.dup2(fd, i)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        time.sleep(600)
    os._exit(0)
os.close(w)
with open(sys.argv[1], "w") as fh:
    fh.write(os.read(r, 32).decode())
'''

REAPER = Path(__file__).resolve().parents[1] / "cleanup" / "helpers" / "reaper.py"


class Subreaper:
    """tests/cleanup/helpers/reaper.py: orphans of what it starts are adopted and reaped by it, and
    everything it still has is SIGKILLed when it is closed (no test leaves processes behind)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([PY, str(REAPER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        hello = json.loads(self.proc.stdout.readline())
        if "ready" not in hello:
            self.close()
            raise RuntimeError(f"cannot become a child subreaper here: {hello}")

    def spawn(self, argv: list[str]) -> int:
        self.proc.stdin.write(json.dumps({"op": "spawn", "argv": argv, "setsid": False}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert "error" not in reply, reply
        return int(reply["pid"])

    def sleeper(self, env: dict[str, str], code: str) -> int:
        """A double-forked setsid ``python -c code`` with ``env`` added; its pid."""
        self.proc.stdin.write(json.dumps({"op": "sleeper", "env": env, "code": code}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert "error" not in reply, reply
        return int(reply["pid"])

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        finally:
            self.proc.wait(timeout=30)


def leave_sleeper(reaper: Subreaper, folder: Path, timeout: float = 120) -> int:
    """A real ``gpuscope run`` whose script leaves a setsid sleeper behind; the sleeper's pid."""
    import time

    script, pidfile = folder / "leftover.py", folder / "sleeper.pid"
    script.write_text(LEFTOVER, encoding="utf-8")
    run = reaper.spawn([PY, "-m", "gpuscope", "run", "--quiet", str(script), str(pidfile)])
    end = time.monotonic() + timeout
    while state_of(run) is not None:   # the reaper reaps it when the run has ended
        assert time.monotonic() < end, "gpuscope run did not end"
        time.sleep(0.05)
    return int(pidfile.read_text())


# --------------------------------------------------------------------------- CUDA rows in a real export

KERNEL_NAMES = ["void gemm<float, 128>(float*, float const*)", "elementwise_add", "reduce_sum"]


def full_export(rep: Path, out: Path) -> Path:
    """``nsys export --lazy=false`` of ``rep`` with the nsys release that wrote it: every table,
    the (empty) CUPTI ones included, with that release's exact columns."""
    from gpuscope.nsys.rep_export import pick_nsys, rep_version

    from gpuscope.nsys.lock import NsysLock

    inst = pick_nsys(rep_version(rep))
    with NsysLock():   # one nsys step at a time on this machine (gpuscope/nsys/lock.py)
        proc = subprocess.run([str(inst.nsys), "export", "--type", "sqlite", "--lazy=false", "-f", "true",
                               "-o", str(out), str(rep)], env=inst.tool_env(), capture_output=True,
                              timeout=180, start_new_session=True)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-2000:]
    return out


def add_kernels(path: Path, pid: int, t0: int, span: int, n: int = 60) -> None:
    """Insert ``n`` kernels (2 devices x 3 streams), their launches (cudaLaunchKernel on the main
    thread) and n/4 memcpys of ``pid`` between t0 and t0+span,
    through the export's own column names (this machine has no GPU to record real ones)."""
    import sqlite3

    conn = sqlite3.connect(path)
    base = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM StringIds").fetchone()[0]
    for i, name in enumerate(KERNEL_NAMES + ["cudaLaunchKernel_v7000"]):
        conn.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (base + i, name))
    gpid = (1 << 48) | (pid << 24)
    step = span // n
    for k in range(n):
        t = t0 + k * step
        _insert(conn, "CUPTI_ACTIVITY_KIND_KERNEL", {
            "start": t, "end": t + step * 2 // 3, "deviceId": k % 2, "contextId": 1, "streamId": 7 + k % 3,
            "correlationId": k + 1, "globalPid": gpid, "demangledName": base + k % 3, "shortName": base + k % 3,
            "gridX": 64, "gridY": 1, "gridZ": 1, "blockX": 256, "blockY": 1, "blockZ": 1, "gridId": k})
        _insert(conn, "CUPTI_ACTIVITY_KIND_RUNTIME", {
            "start": t - step // 6, "end": t - step // 12, "eventClass": 0, "globalTid": gpid | pid,
            "correlationId": k + 1, "nameId": base + 3, "returnValue": 0})
        if k % 4 == 0:
            _insert(conn, "CUPTI_ACTIVITY_KIND_MEMCPY", {
                "start": t + step * 2 // 3, "end": t + step * 5 // 6, "deviceId": k % 2, "contextId": 1,
                "streamId": 7, "correlationId": 10_000 + k, "globalPid": gpid, "bytes": 1 << 20,
                "copyKind": 1, "srcKind": 0, "dstKind": 1})
    conn.commit()
    conn.close()


def _insert(conn, table: str, row: dict) -> None:
    info = list(conn.execute(f"PRAGMA table_info({table})"))
    full = {r[1]: row.get(r[1], 0 if r[3] else None) for r in info}
    conn.execute(f"INSERT INTO {table} ({', '.join(full)}) VALUES ({', '.join('?' * len(full))})",
                 list(full.values()))


def shown_timeline(qtbot, run_dir: Path, size: tuple[int, int] = (1200, 480)):
    """A QtTimeline showing a run folder's report, exposed at ``size`` (the timeline tests' view)."""
    from gpuscope.app.timeline.qt_timeline import QtTimeline
    from gpuscope.nsys.report import load_report

    w = QtTimeline()
    qtbot.addWidget(w)
    w.resize(*size)
    w.set_timeline(load_report(run_dir).timeline)
    w.show()
    qtbot.waitExposed(w)
    return w
