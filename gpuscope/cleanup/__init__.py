"""Cleanup: find leftover processes, zombies, leaked shared memory and orphaned GPU memory,
and remove them safely.

The API a UI needs::

    from gpuscope.cleanup import Scanner, Policy, perform
    scanner = Scanner(conn=store, idle_window_s=300)   # keep it; call scanner.observe() on a timer
    result = scanner.scan()                             # ScanResult: suspects + notes
    for s in result.suspects:                           # a row each: s.title, s.reasons, s.evidence,
        ...                                             # s.actions (first = default), s.blocked, s.advice
    res = perform(suspect, policy=Policy(allow_other_users=False, grace_s=3), conn=store)
    res.ok, res.result, res.message                     # one line; logged in the store

Every action re-checks the identity the listing captured (pid + create time; device + inode
for a segment) right before it acts. See docs/CLEANUP.md.
"""

from __future__ import annotations

from gpuscope.cleanup.actions import act, identify, perform, signal_parent, stop_process
from gpuscope.cleanup.gpu_holders import IdleTracker
from gpuscope.cleanup.model import (ActionResult, ProcIdentity, Reason, ScanResult, ShmIdentity,
                                    Suspect)
from gpuscope.cleanup.safety import Policy
from gpuscope.cleanup.scanner import Scanner, scan
from gpuscope.cleanup.shm_actions import identify_segment, unlink_segment

__all__ = [
    "ActionResult", "IdleTracker", "Policy", "ProcIdentity", "Reason", "ScanResult", "Scanner",
    "ShmIdentity", "Suspect", "act", "identify", "identify_segment", "perform", "scan",
    "signal_parent", "stop_process", "unlink_segment",
]
