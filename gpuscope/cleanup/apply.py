"""Acting on a batch of pids and segment names (``gpuscope cleanup --kill … --unlink … --yes``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

import gpuscope.cleanup.model as m
from gpuscope.cleanup.actions import act, identify, record
from gpuscope.cleanup.model import ProcIdentity
from gpuscope.cleanup.render import render_results
from gpuscope.cleanup.safety import Policy, listing_refusal, static_refusal
from gpuscope.cleanup.scanner import Scanner
from gpuscope.cleanup.shm_actions import identify_segment, name_refusal
from gpuscope.cleanup.snapshot import read_process

if TYPE_CHECKING:
    from gpuscope.store.db import Connection


def _proc_target(pid: int, expects: dict[int, ProcIdentity], listing: m.ScanResult):
    """(identity or None, suspect or None, where the identity came from)."""
    suspect = listing.by_pid(pid)
    if pid in expects:
        return expects[pid], suspect, "--expect"
    if suspect is not None and isinstance(suspect.identity, ProcIdentity):
        return suspect.identity, suspect, "listing"
    return identify(pid), None, "now"


def _plan_line(action: str, what: str, why: str | None, refusal: str | None) -> dict[str, Any]:
    return {"action": action, "target": what, "listed_because": why, "would_refuse": refusal}


def _plan(args, targets, shm_targets) -> list[dict[str, Any]]:
    policy = Policy(allow_other_users=args.allow_other_users, grace_s=args.grace)
    plan = []
    for pid, _ident, suspect, _ in targets:
        proc = read_process(pid)
        action = m.KILL if args.force else m.TERMINATE
        if proc is not None and proc.is_zombie:
            action = m.SIGNAL_PARENT
        why = "; ".join(r.text for r in suspect.reasons) if suspect else None
        refusal = static_refusal(pid) or (listing_refusal(proc, policy) if proc else
                                           f"pid {pid} does not exist")
        what = f"pid {pid} ({proc.cmd if proc else '?'})"
        plan.append(_plan_line(action, what, why, refusal))
    for name, ident, suspect in shm_targets:
        why = "; ".join(r.text for r in suspect.reasons) if suspect else None
        plan.append(_plan_line(m.UNLINK, f"/dev/shm/{name}", why,
                               None if ident else f"/dev/shm/{name} does not exist"))
    return plan


def _missing(action: str, target: str, message: str, refusal: str | None = None) -> m.ActionResult:
    """No such target: refused when a rule refuses it whatever it is (pid 0, a path), else failed."""
    return m.ActionResult(action=action, target=target, identity={}, result="refused" if refusal else "failed",
                          ok=False, message=refusal or message)


def act_on_targets(args: argparse.Namespace, conn: Connection,
                   expects: dict[int, ProcIdentity], emit: Callable) -> int:
    """Resolve identities (from --expect, from a fresh listing, or now), then act or show the plan."""
    with Scanner(conn=conn, use_gpu=not args.no_gpu, idle_window_s=0, shm_min_age_s=0.0) as scanner:
        listing = scanner.scan()
    pids = list(dict.fromkeys([*args.kill, *expects]))
    targets = [(pid, *_proc_target(pid, expects, listing)) for pid in pids]
    shm_targets = []
    names = [n[len("/dev/shm/"):] if n.startswith("/dev/shm/") else n for n in args.unlink]
    for name in dict.fromkeys(names):
        suspect = listing.by_shm(name)
        ident = suspect.identity if suspect else identify_segment(name)
        shm_targets.append((name, ident, suspect))
    if not args.yes:
        plan = _plan(args, targets, shm_targets)
        text = "".join(f"would {p['action']} {p['target']}"
                       + (f" — refused: {p['would_refuse']}" if p["would_refuse"] else "") + "\n"
                       for p in plan)
        emit(args, {"dry_run": True, "plan": plan},
             text + "dry run: nothing was done; add --yes to act\n")
        return 1
    policy = Policy(allow_other_users=args.allow_other_users, grace_s=args.grace)
    results = _do(args, conn, policy, targets, shm_targets)
    emit(args, {"dry_run": False, "results": [r.to_dict() for r in results]}, render_results(results))
    return 0 if all(r.ok for r in results) else 1


def _do(args, conn, policy, targets, shm_targets) -> list[m.ActionResult]:
    results = []
    for pid, ident, suspect, _ in targets:
        if ident is None:
            res = _missing("terminate", f"pid {pid}", f"pid {pid} does not exist", static_refusal(pid))
            record(conn, res)
        else:
            res = act(ident, action=m.KILL if args.force and not _zombie(pid) else None,
                      policy=policy, conn=conn, evidence=suspect.evidence if suspect else None,
                      run_id=suspect.run_id if suspect else None)
        results.append(res)
    for name, ident, _ in shm_targets:
        if ident is None:
            res = _missing(m.UNLINK, f"/dev/shm/{name}", f"/dev/shm/{name} does not exist", name_refusal(name))
            record(conn, res)
        else:
            res = act(ident, policy=policy, conn=conn)
        results.append(res)
    return results


def _zombie(pid: int) -> bool:
    proc = read_process(pid)
    return proc is not None and proc.is_zombie
