"""Test helper: a child-subreaper that builds cleanup scenarios from real processes.

Run as ``python reaper.py``. It makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so
everything the scenarios orphan is adopted by it instead of PID 1 (which does not reap on
these machines) and is reaped as soon as it dies. Commands arrive as JSON lines on stdin and
are answered as JSON lines on stdout. When stdin closes it SIGKILLs every descendant it still
has, reaps them all and exits: a test never leaves processes behind.

Commands (``{"op": ...}``):
  sleeper   {"env": {...}, "code": str}  a double-forked, setsid Python sleeper (or ``code``)
                                -> {"pid"}
  zombie    {"reap": bool}      a parent with an unreaped child -> {"parent", "zombie"}
                                (reap=True: the parent reaps when it gets SIGCHLD)
  spawn     {"argv": [...], "setsid": bool}  a child process -> {"pid"}
  orphan_mp {"script": path}    runs a script that starts a spawn child and exits -> {"pid"}
  call      {"argv": [...], "env": {...}}  runs a command to its end -> {"rc", "stdout", "stderr"}
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
PY = sys.executable

LAZY_PARENT = r"""
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    os._exit(0)
while True:  # wait until the child is a zombie; its SIGCHLD is ignored (default action)
    with open(f"/proc/{pid}/stat") as fh:
        if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
            break
    time.sleep(0.01)
if sys.argv[1] == "reap":  # installed after the child died: only a new SIGCHLD makes it reap
    signal.signal(signal.SIGCHLD, lambda *a: os.waitpid(-1, os.WNOHANG))
print(pid, flush=True)
while True:
    time.sleep(1)
"""


def reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sleeper(env: dict, code: str = "import time; time.sleep(600)") -> dict:
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(r)
            os.setsid()
            grandchild = os.fork()
            if grandchild == 0:
                os.close(w)
                full = dict(os.environ, **env)
                os.execve(PY, [PY, "-c", code], full)
            os.write(w, str(grandchild).encode())
        finally:
            os._exit(0)
    os.close(w)
    pid = int(os.read(r, 64))
    os.close(r)
    os.waitpid(child, 0)
    _wait_asleep(pid)
    return {"pid": pid}


def _wait_asleep(pid: int, timeout_s: float = 30.0) -> None:
    """Until the new interpreter has started and sleeps (state S), so a scan sees a settled process."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "S":
                    return
        except OSError:
            return
        time.sleep(0.02)


def zombie(reap: bool) -> dict:
    p = subprocess.Popen([PY, "-c", LAZY_PARENT, "reap" if reap else "keep"],
                         stdout=subprocess.PIPE, text=True)
    return {"parent": p.pid, "zombie": int(p.stdout.readline())}


def spawn(argv: list, setsid: bool) -> dict:
    p = subprocess.Popen(argv, start_new_session=setsid, stdout=subprocess.DEVNULL)
    return {"pid": p.pid}


def orphan_mp(script: str) -> dict:
    p = subprocess.Popen([PY, script], start_new_session=True, stdout=subprocess.PIPE, text=True)
    child = int(p.stdout.readline())
    p.wait()
    return {"pid": child}


def call(argv: list, env: dict | None) -> dict:
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return {"rc": res.returncode, "stdout": res.stdout, "stderr": res.stderr}


def descendants() -> list[int]:
    me = os.getpid()
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    parent[int(d)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [me]
    while todo:
        cur = todo.pop()
        kids = [p for p, pp in parent.items() if pp == cur]
        out += kids
        todo += kids
    return out


def shutdown() -> None:
    for _ in range(50):
        pids = descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        reap_all()


def handle(cmd: dict) -> dict:
    op = cmd["op"]
    if op == "sleeper":
        return sleeper(cmd.get("env", {}), cmd.get("code") or "import time; time.sleep(600)")
    if op == "zombie":
        return zombie(bool(cmd.get("reap")))
    if op == "spawn":
        return spawn(cmd["argv"], bool(cmd.get("setsid")))
    if op == "call":
        return call(cmd["argv"], cmd.get("env"))
    if op == "orphan_mp":
        return orphan_mp(cmd["script"])
    raise ValueError(op)


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(json.dumps({"error": "prctl failed"}), flush=True)
        return
    print(json.dumps({"ready": os.getpid()}), flush=True)
    try:
        buf = b""
        while True:
            ready, _, _ = select.select([0], [], [], 0.05)
            reap_all()
            if not ready:
                continue
            data = os.read(0, 65536)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    reply = handle(json.loads(line))
                except Exception as exc:  # noqa: BLE001 - report to the test
                    reply = {"error": f"{type(exc).__name__}: {exc}"}
                print(json.dumps(reply), flush=True)
    finally:
        shutdown()


if __name__ == "__main__":
    main()
