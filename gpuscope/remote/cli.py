"""``gpuscope --host [USER@]HOST[:PORT] COMMAND ...``: a gpuscope command run on another machine.

One ssh connection; the agent runs the command line there (paths are the remote's), its stdout
and stderr stream here, and this process exits with the remote command's exit code. Ctrl-C stops
the remote command. A ``run`` goes on there when the connection drops: ``gpuscope --host H
history`` shows it later.
"""

from __future__ import annotations

import sys
from typing import Any

from gpuscope.errors import UserError
from gpuscope.remote import protocol
from gpuscope.remote.bootstrap import open_agent
from gpuscope.remote.connection import Connection
from gpuscope.remote.hostspec import HostSpec
from gpuscope.remote.protocol import ConnectionLostError

STOP_WAIT_S = 30.0   # after Ctrl-C: how long the remote command has to stop
LOST = 255           # as ssh itself exits when the connection fails


def main(host_text: str, argv: list[str]) -> int:
    """Run ``argv`` (a gpuscope command line) on ``host_text``; the remote exit code."""
    host = HostSpec.parse(host_text)
    if not argv or argv[0].startswith("-"):
        raise UserError(f"--host {host} needs a command after it: gpuscope --host {host} COMMAND ...")
    conn = Connection(open_agent(host, progress=_progress), host=str(host))
    try:
        pending = conn.start("exec", {"argv": argv}, on_event=_relay)
        try:
            result = pending.wait()
        except KeyboardInterrupt:
            print(f"gpuscope: stopping the command on {host} (Ctrl-C again to leave it)", file=sys.stderr)
            pending.cancel()
            result = pending.wait(STOP_WAIT_S)
    except ConnectionLostError as exc:
        later = (f": the run goes on there; see it with `gpuscope --host {host} history`"
                 if argv[0] == "run" else "")
        print(f"gpuscope: error: {exc}{later}", file=sys.stderr)
        return LOST
    finally:
        conn.close()
    return _exit_code(result)


def _exit_code(result: Any) -> int:
    code = result.get("code") if isinstance(result, dict) else None
    if not isinstance(code, int):
        return 0
    return 128 - code if code < 0 else code   # killed by a signal there: as a shell says it


def _relay(kind: str, data: Any) -> None:
    """The remote command's output, written here as it comes."""
    stream = {"stdout": sys.stdout, "stderr": sys.stderr}.get(kind)
    if stream is None or not isinstance(data, dict) or "b64" not in data:
        return
    raw = protocol.unb64(data["b64"])
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        buffer.write(raw)
    else:   # a text-only stream (in-process callers)
        stream.write(raw.decode("utf-8", "replace"))
    stream.flush()


def _progress(text: str, fraction: float | None) -> None:
    """The agent's install steps on stderr (pip's own lines are left out)."""
    if fraction is not None:
        print(f"gpuscope: {text}", file=sys.stderr, flush=True)
