"""Cleanup actions in the run store (owned by gpuscope.cleanup).

Every action gpuscope takes or refuses (terminate, kill, signal-parent, unlink) is one row:
when, what, on which target and identity, the result, a one-line message and the OS user.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.store.db import Connection
    from typing import Any

# the tables: gpuscope.store.tables.CLEANUP_ACTIONS


@dataclass(frozen=True)
class ActionRow:
    """One clean-up action as logged."""

    id: int
    time_ns: int
    action: str
    target: str
    pid: int | None
    identity: dict[str, Any]
    result: str
    ok: bool
    message: str
    user: str
    run_id: str | None
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def log_action(conn: Connection, *, action: str, target: str, identity: dict[str, Any],
               result: str, ok: bool, message: str, user: str, run_id: str | None = None,
               details: dict[str, Any] | None = None, time_ns: int | None = None) -> int:
    """Append one action to the log; returns its row id."""
    cur = conn.execute(
        "INSERT INTO cleanup_actions (time_ns, action, target, pid, identity_json, result, ok,"
        " message, user, run_id, details_json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (time_ns or time.time_ns(), action, target, identity.get("pid"), json.dumps(identity),
         result, int(bool(ok)), message, user, run_id, json.dumps(details or {})),
    )
    assert cur.lastrowid is not None   # an INSERT's row
    return int(cur.lastrowid)


def list_actions(conn: Connection, limit: int = 100) -> list[ActionRow]:
    """The most recent actions, newest first."""
    rows = conn.execute("SELECT * FROM cleanup_actions ORDER BY time_ns DESC, id DESC LIMIT ?",
                        (limit,)).fetchall()
    return [ActionRow(
        id=r["id"], time_ns=r["time_ns"], action=r["action"], target=r["target"], pid=r["pid"],
        identity=json.loads(r["identity_json"]), result=r["result"], ok=bool(r["ok"]),
        message=r["message"], user=r["user"], run_id=r["run_id"],
        details=json.loads(r["details_json"] or "{}"),
    ) for r in rows]
