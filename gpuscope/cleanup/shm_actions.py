"""Unlinking a leaked /dev/shm segment or named semaphore (``sem.*``), with the same care as
signalling a process."""

from __future__ import annotations

import os
import stat

import gpuscope.cleanup.model as m
from gpuscope.cleanup.evidence import human_bytes
from gpuscope.cleanup.safety import Policy, owner_refusal
from gpuscope.procs.shm import unlink_refusal


def identify_segment(name: str, shm_dir: str = "/dev/shm") -> m.ShmIdentity | None:
    """The identity of a segment now (for a name not taken from a listing)."""
    try:
        st = os.lstat(os.path.join(shm_dir, name))
    except OSError:
        return None
    return m.ShmIdentity(name, st.st_dev, st.st_ino)


def name_refusal(name: str) -> str | None:
    if not name or "/" in name or name in (".", ".."):
        return f"refusing: {name!r} is not a shared memory segment name"
    return None


def _refusal(ident: m.ShmIdentity, path: str, policy: Policy) -> tuple[str | None, int]:
    """(refusal or None, allocated bytes). Raises FileNotFoundError when the segment is gone."""
    why = name_refusal(ident.name)
    if why:
        return why, 0
    st = os.lstat(path)
    # the owner's line names the remedy (root and --allow-other-users); the rest is procs.shm's
    why = owner_refusal(st.st_uid, path, policy) if stat.S_ISREG(st.st_mode) else None
    why = why or unlink_refusal(path, (ident.dev, ident.ino), allow_other_users=policy.allow_other_users)
    if why:
        return why, 0
    return None, st.st_blocks * 512


def unlink_segment(ident: m.ShmIdentity, policy: Policy, shm_dir: str = "/dev/shm") -> m.ActionResult:
    """Remove a segment (or named semaphore) that is still the listed file and that no live
    process maps or holds."""
    path = os.path.join(shm_dir, ident.name)

    def result(res: str, ok: bool, msg: str, **kw) -> m.ActionResult:
        return m.ActionResult(action=m.UNLINK, target=path, identity=ident.to_dict(), result=res,
                              ok=ok, message=msg, **kw)

    try:
        why, allocated = _refusal(ident, path, policy)
        if why:
            return result("refused", False, why)
        os.unlink(path)
    except FileNotFoundError:
        return result("gone", True, f"{path} is gone (someone removed it since it was listed)",
                      final_state="gone")
    except OSError as exc:
        return result("failed", False, f"could not unlink {path}: {exc.strerror}")
    return result("done", True, f"unlinked {path}; {human_bytes(allocated)} of RAM freed",
                  final_state="gone", freed={"shm_bytes": allocated})
