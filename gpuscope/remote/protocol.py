"""The agent protocol's framing and message shapes (docs/REMOTE.md, "Protocol"), used on both sides.

One JSON object per line, UTF-8, both ways; bytes travel base64 in a ``"b64"`` field. Standard
library only: the agent runs on a remote host without Qt.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from gpuscope.errors import UserError

PROTOCOL = 1
HELLO = "gpuscope-agent"
MAX_LINE = 64 << 20   # one message; a longer line is a broken peer, not a message

__all__ = ["HELLO", "MAX_LINE", "PROTOCOL", "ConnectionLostError", "ProtocolError", "RemoteError",
           "RemoteInternalError", "b64", "cancel", "check_hello", "decode", "encode", "error_reply",
           "event", "ok_reply", "request", "unb64"]


class RemoteError(UserError):
    """An error the agent answered (``kind: user``): one line, shown without a traceback."""

    kind = "user"


class RemoteInternalError(RemoteError):
    """Something unexpected failed on the agent (``kind: internal``); details in its error log."""

    kind = "internal"


class ConnectionLostError(RemoteError):
    """The connection to the agent ended while a request waited for its reply."""

    kind = "lost"


class ProtocolError(RemoteError):
    """The peer sent something that is not this protocol (another version, a broken line)."""

    kind = "protocol"


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line (compact JSON, ``\\n``-terminated)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One line as a message; ProtocolError for anything that is not a JSON object."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not a protocol line ({exc}): {line[:80]!r}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"not a protocol message: {line[:80]!r}")
    return message


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def request(req_id: int, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": req_id, "op": op, "args": args or {}}


def cancel(req_id: int, target: int) -> dict[str, Any]:
    return request(req_id, "cancel", {"target": target})


def event(req_id: int, kind: str, data: Any = None) -> dict[str, Any]:
    return {"id": req_id, "event": kind, "data": data}


def ok_reply(req_id: int, result: Any = None) -> dict[str, Any]:
    return {"id": req_id, "ok": True, "result": result}


def error_reply(req_id: int, error: str, kind: str = "user") -> dict[str, Any]:
    return {"id": req_id, "ok": False, "error": one_line(error), "kind": kind}


def one_line(text: str) -> str:
    """A message as one line (an error never spans lines on the wire)."""
    return " ".join(str(text).split()) or "error"


def check_hello(message: dict[str, Any], host: str) -> dict[str, Any]:
    """The agent's hello, checked: ProtocolError when it is not an agent or speaks another version."""
    if message.get("hello") != HELLO:
        raise ProtocolError(f"{host}: the remote did not answer as a gpuscope agent")
    version = message.get("protocol")
    if version != PROTOCOL:
        raise ProtocolError(f"{host}: the agent speaks protocol {version}, this gpuscope speaks "
                            f"{PROTOCOL} (gpuscope {message.get('version', '?')} there): install the same version")
    return message


def raise_for(reply: dict[str, Any], host: str) -> Any:
    """The result of a reply, or its error raised as one line."""
    if reply.get("ok"):
        return reply.get("result")
    text = one_line(str(reply.get("error") or "failed"))
    if reply.get("kind") == "user":
        raise RemoteError(text)
    raise RemoteInternalError(f"{host}: {text}")
