"""Acting on suspects: terminate, kill, signal a zombie's parent, unlink a segment.

Each action re-checks the target's identity right before it signals (a pidfd is opened first
and the create time checked after, so a signal can never reach a reused pid), applies the
rules of :mod:`gpuscope.cleanup.safety`, and is logged in the run store when a connection is
given. Results are :class:`~gpuscope.cleanup.model.ActionResult` with one-line messages.
"""

from __future__ import annotations

import os
import pwd
import signal
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import gpuscope.cleanup.model as m
from gpuscope.cleanup.evidence import human_bytes, human_s
from gpuscope.cleanup.safety import GoneError, Policy, RefusedError, check_process, same_process
from gpuscope.cleanup.shm_actions import unlink_segment
from gpuscope.cleanup.snapshot import ProcInfo, read_process
from gpuscope.procs.key import ProcKey
from gpuscope.procs.read import start_ticks_at
from gpuscope.procs.signals import ProcGoneError, ProcHandle
from gpuscope.store import cleanup_log as store_actions

if TYPE_CHECKING:
    from gpuscope.store.db import Connection

KILL_WAIT_S = 5.0      # how long to wait for SIGKILL to take effect
REAP_WAIT_S = 1.0      # how long to wait for a parent to reap


def current_user() -> str:
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        name = str(os.geteuid())
    sudo = os.environ.get("SUDO_USER")
    return f"{name} (sudo from {sudo})" if sudo and sudo != name else name


def identify(pid: int) -> m.ProcIdentity | None:
    """The identity of ``pid`` now (for a raw pid not taken from a listing)."""
    proc = read_process(pid)
    return m.ProcIdentity(pid, proc.create_time) if proc else None


class _Handle(ProcHandle):
    """A process verified against its listed identity (and the safety rules); signals go
    through :class:`gpuscope.procs.signals.ProcHandle` (a pidfd where the kernel has them)."""

    def __init__(self, ident: m.ProcIdentity, policy: Policy) -> None:
        self.ident, self.policy = ident, policy
        try:
            super().__init__(ProcKey(ident.pid, start_ticks_at(ident.create_time)))
        except ProcGoneError as exc:
            check_process(ident, policy)   # the one-line refusal or GoneError, when one applies
            raise GoneError(f"pid {ident.pid} is gone ({exc})") from None
        try:
            self.proc: ProcInfo = check_process(ident, policy)  # after the pidfd is open
        except BaseException:
            self.close()
            raise

    def send(self, sig: int) -> None:
        if self.fd is None:
            check_process(self.ident, self.policy)  # re-check right before signalling
        super().send(sig)


def final_state(ident: m.ProcIdentity, wait_s: float = REAP_WAIT_S) -> str:
    """'gone', 'alive', 'zombie (not reaped by PID 1)' or 'zombie (awaiting reap by parent N)'."""
    end = time.monotonic() + wait_s
    while True:
        proc = read_process(ident.pid)
        if proc is None or not same_process(proc, ident):
            return "gone"
        if not proc.is_zombie:
            return "alive"
        if time.monotonic() >= end:
            return "zombie (not reaped by PID 1)" if proc.ppid == 1 else \
                f"zombie (awaiting reap by parent {proc.ppid})"
        time.sleep(0.05)


def _freed(proc: ProcInfo, evidence: m.Evidence | None) -> dict[str, int]:
    freed = {"rss_bytes": proc.rss}
    gpu = evidence.gpu_memory_bytes if isinstance(evidence, (m.ProcessEvidence, m.GpuGhostEvidence)) \
        else None
    if gpu:
        freed["gpu_memory_bytes"] = int(gpu)
    return freed


def _result(action: str, ident: m.ProcIdentity, result: str, ok: bool, message: str,
            **kw: Any) -> m.ActionResult:
    return m.ActionResult(action=action, target=f"pid {ident.pid}", identity=ident.to_dict(),
                          result=result, ok=ok, message=message, **kw)


def _stop(h: _Handle, action: str, grace_s: float) -> tuple[str, float]:
    """Send SIGTERM (terminate) or SIGKILL; escalate after the grace period. Returns (how, secs)."""
    start = time.monotonic()
    if action == m.TERMINATE:
        h.send(signal.SIGTERM)
        if h.wait_exit(grace_s):
            return "SIGTERM", time.monotonic() - start
    try:
        h.send(signal.SIGKILL)
    except ProcessLookupError:  # it exited (and was reaped) just now
        return ("SIGTERM" if action == m.TERMINATE else "SIGKILL"), time.monotonic() - start
    if not h.wait_exit(KILL_WAIT_S):
        raise TimeoutError(f"pid {h.ident.pid} is still running {KILL_WAIT_S:g} s after SIGKILL "
                           "(uninterruptible sleep in the kernel?)")
    how = "SIGKILL" if action == m.KILL else f"SIGKILL after the {grace_s:g} s grace period"
    return how, time.monotonic() - start


def stop_process(ident: m.ProcIdentity, policy: Policy, action: str = m.TERMINATE,
                 evidence: m.Evidence | None = None) -> m.ActionResult:
    """Terminate (SIGTERM, grace, SIGKILL) or kill (SIGKILL) one process."""
    try:
        h = _Handle(ident, policy)
    except RefusedError as exc:
        return _result(action, ident, "refused", False, str(exc))
    except GoneError as exc:
        return _result(action, ident, "gone", True, str(exc), final_state="gone")
    try:
        proc = h.proc
        if proc.is_zombie:
            return _result(action, ident, "refused", False,
                           f"pid {ident.pid} is a zombie: it has already exited and no signal "
                           "removes it; signal its parent instead")
        freed = _freed(proc, evidence)
        how, took = _stop(h, action, policy.grace_s)
    except (RefusedError, PermissionError, TimeoutError, ProcessLookupError) as exc:
        return _result(action, ident, "failed", False, f"{exc}")
    finally:
        h.close()
    state = final_state(ident)
    verb = "terminated" if action == m.TERMINATE else "killed"
    msg = f"{verb} pid {ident.pid} ({proc.name}) with {how} in {human_s(took)}; " \
          f"{human_bytes(freed['rss_bytes'])} RSS"
    if freed.get("gpu_memory_bytes"):
        msg += f" and {human_bytes(freed['gpu_memory_bytes'])} GPU memory"
    msg += " freed"
    if state != "gone":
        msg += f"; now a {state}"
    return _result(action, ident, "done", True, msg, final_state=state, freed=freed)


def _zombie_parent(ident: m.ProcIdentity) -> ProcInfo:
    proc = read_process(ident.pid)
    if proc is None:
        raise GoneError(f"pid {ident.pid} is gone (it was reaped since it was listed)")
    if not same_process(proc, ident):
        raise RefusedError(f"refusing: pid {ident.pid} was restarted since it was listed (create time changed)")
    if not proc.is_zombie:
        raise RefusedError(f"refusing: pid {ident.pid} is not a zombie (state {proc.status}); "
                      "terminate it instead")
    return proc


def signal_parent(ident: m.ProcIdentity, policy: Policy) -> m.ActionResult:
    """Ask a zombie's parent to reap it (SIGCHLD); advice only when the parent is PID 1."""
    act = m.SIGNAL_PARENT
    try:
        zombie = _zombie_parent(ident)
    except GoneError as exc:
        return _result(act, ident, "gone", True, str(exc), final_state="gone")
    except RefusedError as exc:
        return _result(act, ident, "refused", False, str(exc))
    ppid = zombie.ppid
    if ppid == 1:
        init = read_process(1)
        name = init.name if init else "init"
        return _result(act, ident, "advice", False,
                       f"pid {ident.pid} is a zombie of PID 1 ({name}), which does not reap it; no "
                       "signal can remove it: start the container with --init (or tini as PID 1)",
                       final_state="zombie (not reaped by PID 1)")
    if ppid == os.getpid():
        os.waitpid(ident.pid, os.WNOHANG)
        return _result(act, ident, "done", True, f"gpuscope reaped its own zombie child pid {ident.pid}",
                       final_state=final_state(ident))
    return _sigchld(ident, ppid, policy)


def _sigchld(ident: m.ProcIdentity, ppid: int, policy: Policy) -> m.ActionResult:
    act = m.SIGNAL_PARENT
    parent = read_process(ppid)
    if parent is None:
        return _result(act, ident, "failed", False, f"the parent pid {ppid} of pid {ident.pid} is gone")
    try:
        h = _Handle(m.ProcIdentity(ppid, parent.create_time), policy)
    except (RefusedError, GoneError) as exc:
        return _result(act, ident, "refused", False, f"{exc} (the parent of zombie pid {ident.pid})")
    try:
        h.send(signal.SIGCHLD)
    except (RefusedError, PermissionError, ProcessLookupError) as exc:
        return _result(act, ident, "failed", False, str(exc))
    finally:
        h.close()
    state = final_state(ident, REAP_WAIT_S)
    details = {"parent_pid": ppid, "parent": parent.cmd}
    if state == "gone":
        return _result(act, ident, "done", True, f"sent SIGCHLD to parent {parent.name} (pid {ppid}); "
                       f"it reaped zombie pid {ident.pid}", final_state=state, details=details)
    return _result(act, ident, "not-reaped", False,
                   f"sent SIGCHLD to parent {parent.name} (pid {ppid}) but pid {ident.pid} is still a "
                   f"zombie: the parent does not reap on SIGCHLD; terminate the parent "
                   f"(gpuscope cleanup --kill {ppid}) to hand the zombie to init",
                   final_state=state, details=details)


def record(conn: Connection | None, res: m.ActionResult, run_id: str | None = None) -> None:
    """Log one action result in the run store (the default store when ``conn`` is None).

    The action has already happened: a store that cannot be written is noted in the result's
    details (``log_error``) rather than raised."""
    try:
        if conn is None:
            from gpuscope.store.db import connect

            conn = connect()
        store_actions.log_action(conn, action=res.action, target=res.target, identity=res.identity,
                                 result=res.result, ok=res.ok, message=res.message,
                                 user=current_user(), run_id=run_id,
                                 details={"final_state": res.final_state, "freed": res.freed,
                                          **res.details})
    except (OSError, sqlite3.Error) as exc:
        res.details["log_error"] = f"not logged in the run store: {exc}"


def act(identity: m.ProcIdentity | m.ShmIdentity, *, action: str | None = None,
        policy: Policy | None = None, conn: Connection | None = None,
        evidence: m.Evidence | None = None, run_id: str | None = None,
        shm_dir: str = "/dev/shm") -> m.ActionResult:
    """Do ``action`` on a listed target (None: unlink a segment, signal a zombie's parent,
    terminate anything else) and log it."""
    policy = policy or Policy()
    if isinstance(identity, m.ShmIdentity):
        res = unlink_segment(identity, policy, shm_dir)
    elif action == m.SIGNAL_PARENT or action is None and _is_zombie(identity):
        res = signal_parent(identity, policy)
    else:
        res = stop_process(identity, policy, action or m.TERMINATE, evidence)
    record(conn, res, run_id)
    return res


def _is_zombie(ident: m.ProcIdentity) -> bool:
    proc = read_process(ident.pid)
    return proc is not None and same_process(proc, ident) and proc.is_zombie


def perform(suspect: m.Suspect, action: str | None = None, *, policy: Policy | None = None,
            conn: Connection | None = None, shm_dir: str = "/dev/shm") -> m.ActionResult:
    """Act on a suspect from a listing (what the app's Cleanup tab calls per checked row)."""
    if suspect.identity is None:
        res = m.ActionResult(action=action or "none", target=suspect.title, identity={},
                             result="advice", ok=False,
                             message=suspect.advice or "nothing gpuscope can act on")
        record(conn, res)
        return res
    if action is not None and suspect.actions and action not in suspect.actions:
        raise ValueError(f"{action} is not an action for {suspect.key} (offers {suspect.actions})")
    return act(suspect.identity, action=action, policy=policy, conn=conn,
               evidence=suspect.evidence, run_id=suspect.run_id, shm_dir=shm_dir)
