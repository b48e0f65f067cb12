"""Record a run under ``nsys profile``: the command line, then .qdstrm → .nsys-rep → .sqlite.

The run engine drives it::

    session = record.prepare(spec, run_dir, argv, env)     # argv: what would run without nsys
    proc = subprocess.Popen(session.argv, env=session.env, start_new_session=True, ...)
    session.started(proc.pid)                               # lets kill() find nsys and its agent
    ... proc.wait() ...   (on stop: end the program's processes, not nsys; on a hang: session.kill())
    result = session.finish(progress=print, timeout_s=120, cancelled=event)  # import + export, bounded

Expected failures (no report, a hung importer, a failed export) come back as ``NsysResult(ok=False,
reason=...)``, never as exceptions. See docs/NSYS-RECORDING.md.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpuscope.nsys import agents as procs
from gpuscope.nsys.diagnostics import Finding, diagnose, nvtx_pair_note
from gpuscope.nsys.locate import NsysInstall, find_nsys
from gpuscope.spec import RunSpec

REPORT_NAME = "report"
FORK_NOTE = (
    "nsys traces fork children before exec (--trace-fork-before-exec=true) so that fork workers "
    "appear in the report. nsys documents that tracing in this interval \"relies on undefined behavior "
    "and might cause your application to crash or deadlock\"; gpuscope re-registers NVTX strings in "
    "fork children so their ranges are kept. The spawn start method remains the recommended fix.")
Progress = Callable[[str], None]


@dataclass
class NsysResult:
    """What :meth:`NsysSession.finish` produced."""

    ok: bool
    reason: str | None
    rep_path: Path | None
    sqlite_path: Path | None
    qdstrm_path: Path | None
    steps: list[tuple[str, float]] = field(default_factory=list)
    nsys_version: str = ""
    nsys_path: str = ""
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok, "reason": self.reason, "nsys_version": self.nsys_version, "nsys_path": self.nsys_path,
            "rep_path": str(self.rep_path) if self.rep_path else None,
            "sqlite_path": str(self.sqlite_path) if self.sqlite_path else None,
            "qdstrm_path": str(self.qdstrm_path) if self.qdstrm_path else None,
            "steps": [[name, round(sec, 3)] for name, sec in self.steps],
            "findings": [f.to_dict() for f in self.findings],
        }


def profile_flags(spec: RunSpec) -> list[str]:
    """The ``nsys profile`` options for ``spec`` (accepted by nsys 2022.4, 2023.4 and 2024.2)."""
    trace = ",".join(spec.nsys.trace) or "none"
    flags = [f"--trace={trace}", "--sample=none", "--cpuctxsw=none"]
    if spec.nsys.fork_tracing(spec.start_method):
        flags.append("--trace-fork-before-exec=true")
    return flags


def prepare(spec: RunSpec, run_dir: Path, argv: list[str], env: dict[str, str],
            install: NsysInstall | None = None) -> "NsysSession":
    """The nsys command line and environment that record ``argv``; raises UserError without nsys."""
    install = install or find_nsys()
    run_dir = Path(run_dir)
    output = run_dir / REPORT_NAME
    full = [str(install.nsys), "profile", *profile_flags(spec), "-o", str(output), "-f", "true",
            *spec.nsys.extra_args, *argv]
    notes = []
    if spec.nsys.fork_tracing(spec.start_method):
        notes.append(FORK_NOTE)
    if "nvtx" in spec.nsys.trace:
        note = nvtx_pair_note(nvtx_version(spec.python or sys.executable, env), install.version_tuple)
        if note:
            notes.append(note)
    if install.importer is None:
        notes.append(f"no QdstrmImporter found beside {install.nsys}; if nsys leaves only a .qdstrm file, "
                     f"gpuscope cannot convert it")
    return NsysSession(install, run_dir, output, full, dict(env), notes)


def nvtx_version(python: str, env: dict[str, str] | None = None) -> str | None:
    """The ``nvtx`` package version importable by ``python`` (None if absent or unknown)."""
    code = "import importlib.metadata as m\ntry: print(m.version('nvtx'))\nexcept Exception: pass"
    try:
        proc = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


@dataclass
class NsysSession:
    """One prepared ``nsys profile``: run :attr:`argv` with :attr:`env`, then :meth:`finish`."""

    install: NsysInstall
    run_dir: Path
    output: Path          # run_dir/"report": nsys adds .qdstrm / .nsys-rep
    argv: list[str]
    env: dict[str, str]
    notes: list[str]
    pid: int | None = None
    started_at: float | None = None
    known_pids: set[int] = field(default_factory=set)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def rep_path(self) -> Path:
        return self.output.with_name(self.output.name + ".nsys-rep")

    @property
    def qdstrm_path(self) -> Path:
        return self.output.with_name(self.output.name + ".qdstrm")

    @property
    def sqlite_path(self) -> Path:
        return self.output.with_name(self.output.name + ".sqlite")

    def versions(self) -> dict[str, str]:
        """For the run's spec.json: which nsys recorded it."""
        return {"nsys": self.install.version, "nsys_path": str(self.install.nsys)}

    def started(self, pid: int) -> None:
        """Tell the session the pid of the ``nsys profile`` process (the Popen of :attr:`argv`)."""
        self.pid = pid
        self.known_pids.add(pid)
        self.started_at = time.monotonic()

    def _nsys_pids(self) -> list[int]:
        pids = set(procs.profile_processes(str(self.output)))
        if self.pid is not None and procs.alive(self.pid):
            pids.add(self.pid)
        self.known_pids |= pids
        return sorted(pids)

    def running(self) -> bool:
        """True while an ``nsys profile`` for this session is alive."""
        return bool(self._nsys_pids())

    def interrupt(self) -> bool:
        """Graceful stop: SIGINT to nsys's process group. nsys passes it on to the program and still
        writes the report. Returns False when no nsys was running."""
        sent = False
        for pid in self._nsys_pids():
            try:
                os.killpg(os.getpgid(pid), signal.SIGINT)
                sent = True
            except (ProcessLookupError, PermissionError):
                continue
        return sent

    def kill(self, grace_s: float = 2.0) -> list[int]:
        """Stop nsys, the profiled program's tree and nsys's agent (SIGTERM, then SIGKILL after
        ``grace_s``). Removes the temporary report a killed nsys leaves in /tmp and the /dev/shm files
        it and its agent used that nothing else uses any more. Returns the pids
        signalled; zombies count as gone.

        The agent is recognised by the ``nsys profile`` pid in its session name, so call
        :meth:`started` (or call this while nsys is still alive); agents of other sessions are left
        alone (see :func:`gpuscope.nsys.agents.find_stale_agents` for those)."""
        self._nsys_pids()  # adds any live nsys of this session to known_pids
        self.known_pids = {p for p in self.known_pids if procs.still_nsys(p)}  # never a reused pid
        targets = procs.tree(self.known_pids)
        targets |= {a.pid for a in procs.agents() if a.profile_pid in self.known_pids}
        targets = {p for p in targets if procs.alive(p)}
        temp = procs.temp_reports(targets)
        shm = procs.shm_files(targets)

        def watch() -> None:  # a SIGTERMed nsys starts writing its report to /tmp: note that file too
            temp.update(procs.temp_reports(targets))
            shm.update(procs.shm_files(targets))

        procs.terminate(targets, grace_s, watch=watch)
        for path in temp:
            try:
                os.unlink(path)
            except OSError:
                pass
        procs.remove_unused_shm(shm)  # what a SIGKILLed nsys and agent leave in /dev/shm
        return sorted(targets)

    # -- after nsys exited ----------------------------------------------------------------
    def finish(self, progress: Progress | None = None, timeout_s: float = 120.0,
               keep_qdstrm: bool = False, cancelled: threading.Event | None = None) -> NsysResult:
        """Import the .qdstrm if nsys left only that, export SQLite, run diagnostics.

        ``timeout_s`` bounds the whole of it (each step gets what is left). The .qdstrm (tens of MB,
        readable only by the importer of the same nsys version) is deleted once imported unless
        ``keep_qdstrm``. When ``cancelled`` is set (a Stop while finishing), the running step's tool
        is ended with its process group and what was recorded so far (.qdstrm, .nsys-rep) is kept.
        Never raises for expected failures: see ``NsysResult.ok`` / ``reason``.
        """
        say = progress or (lambda _line: None)
        self._cancelled = cancelled or threading.Event()
        deadline = time.monotonic() + timeout_s
        result = NsysResult(False, None, None, None, None, [], self.install.version, str(self.install.nsys))
        if self.started_at is not None:
            result.steps.append(("profile", time.monotonic() - self.started_at))
        reason = self._wait_for_nsys(deadline, say) or self._import(deadline, say, result)
        if reason is None:
            reason = self._export(deadline, say, result)
        if reason is None:
            try:
                result.findings = diagnose(self.sqlite_path)
            except sqlite3.Error as exc:
                reason = f"the SQLite export cannot be read: {exc}"
        if reason is None and result.rep_path and not keep_qdstrm and self.qdstrm_path.exists():
            self.qdstrm_path.unlink()
        result.qdstrm_path = self.qdstrm_path if self.qdstrm_path.exists() else None
        if reason is not None and self._cancelled.is_set():
            reason = f"{reason}; {self._kept()}"
        result.ok, result.reason = reason is None, reason
        say("nsys: done (" + ", ".join(f"{n} {s:.1f} s" for n, s in result.steps) + ")" if result.ok
            else f"nsys: failed: {reason}")
        return result

    def _wait_for_nsys(self, deadline: float, say: Progress) -> str | None:
        if not self.running():
            return None
        say("nsys: waiting for nsys to finish writing the report")
        while time.monotonic() < deadline and self.running() and not self._cancelled.is_set():
            time.sleep(0.1)
        if self.running():
            self.kill()
            if self._cancelled.is_set():
                return "stopped while nsys was writing the report; the report was abandoned"
            return "nsys did not finish writing the report in time and was stopped"
        return None

    def _import(self, deadline: float, say: Progress, result: NsysResult) -> str | None:
        rep, qdstrm = self.rep_path, self.qdstrm_path
        fresh_rep = rep.exists() and (not qdstrm.exists() or rep.stat().st_mtime >= qdstrm.stat().st_mtime)
        if fresh_rep:
            result.rep_path = rep
            return None
        if not qdstrm.exists():
            return (f"nsys wrote no report ({qdstrm.name} and {rep.name} are missing): it failed or was "
                    f"stopped before it finished; see the run's output")
        if self.install.importer is None:
            return f"nsys left {qdstrm.name} but no QdstrmImporter was found beside {self.install.nsys}"
        say(f"nsys: importing {qdstrm.name}")
        cmd = [str(self.install.importer), "-i", str(qdstrm), "-f"]
        reason = self._step("import", cmd, deadline, result)
        if reason is not None and rep.exists():
            rep.unlink()  # a half-written report would pass for a finished one next time
        if reason is None and not rep.exists():
            reason = f"QdstrmImporter did not write {rep.name} (see {self.run_dir / 'nsys-import.log'})"
        if reason is None:
            result.rep_path = rep
        return reason

    def _export(self, deadline: float, say: Progress, result: NsysResult) -> str | None:
        say("nsys: exporting SQLite")
        out = self.sqlite_path
        cmd = [str(self.install.nsys), "export", "--type", "sqlite", "-q", "true", "-o", str(out), "-f", "true",
               str(self.rep_path)]
        reason = self._step("export", cmd, deadline, result)
        if reason is not None and out.exists():
            out.unlink()  # never leave a partial export for a reader to trust
        if reason is None and not out.exists():
            reason = f"nsys export did not write {out.name} (see {self.run_dir / 'nsys-export.log'})"
        if reason is None:
            result.sqlite_path = out
        return reason

    def _step(self, name: str, cmd: list[str], deadline: float, result: NsysResult) -> str | None:
        """Run one tool with the time left; its output goes to ``run_dir/nsys-<name>.log``."""
        left = deadline - time.monotonic()
        if self._cancelled.is_set():
            return f"stopped before the nsys {name} step"
        if left <= 0:
            return f"no time left for the nsys {name} step"
        log = self.run_dir / f"nsys-{name}.log"
        t0 = time.monotonic()
        with open(log, "wb") as fh:
            try:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=self.install.tool_env(self.env), start_new_session=True)
            except OSError as exc:
                return f"cannot start {Path(cmd[0]).name}: {exc.strerror or exc}"
            code = self._wait_step(proc, t0 + left)
        result.steps.append((name, time.monotonic() - t0))
        if code is None:
            if self._cancelled.is_set():
                return f"stopped during the nsys {name} step"
            return f"nsys {name} step did not finish within {left:.3g} s and was stopped"
        if code != 0:
            return f"nsys {name} step failed (exit {code}): {_last_line(log)}"
        return None


    def _wait_step(self, proc: subprocess.Popen[bytes], until: float) -> int | None:
        """The step's exit code; None when it ran past ``until`` or was cancelled (then it is ended,
        with everything in its process group and below, before this returns)."""
        while not self._cancelled.is_set():
            try:
                return proc.wait(timeout=max(0.0, min(0.1, until - time.monotonic())))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= until:
                    break
        procs.terminate(procs.tree([proc.pid]), 1.0)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return None

    def _kept(self) -> str:
        kept = [p.name for p in (self.rep_path, self.qdstrm_path) if p.exists()]
        return f"kept {' and '.join(kept)} in {self.run_dir}" if kept else "nothing was recorded to keep"


def _last_line(path: Path) -> str:
    """What an nsys step's log says went wrong, in one line: its status line when it printed one
    (the importer ends with a brace-structured error dump whose last line is "}"), else its last
    line with words in it."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    status = [ln for ln in lines if "Status: " in ln] or [ln for ln in lines if "Failed" in ln]
    if status:
        return status[-1][-200:]
    worded = [ln for ln in lines if any(c.isalpha() for c in ln)]
    return worded[-1][:200] if worded else "no output"
