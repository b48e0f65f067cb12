"""Rules on what the injected hook recorded about processes: forks with threads, deaths by signal.

Both read ``I`` lines of the event logs (docs/EVENTS.md) written by ``gpuscope/inject/forkwatch.py``:
``fork_threads`` (threads alive in the parent at a fork) and ``child_exits`` (multiprocessing
children that ended with a non-zero status). :func:`scan_info` takes them from the run's event-log
reader (``trace.events.RunEvents``: its identity records, from a cursor), live or after the run.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.procs.files import pid_path, read_bytes
from gpuscope.findings.registry import Input, OnStop, Phase, RunInputs, declare, rule

if TYPE_CHECKING:
    from gpuscope.trace.events import RunEvents

KEYS = ("fork_threads", "child_exits", "role")
# Threads of multiprocessing's own machinery: forking beside them is the pool's business, not the user's.
MP_TARGETS = {"_handle_workers", "_handle_tasks", "_handle_results", "Queue._feed", "_feed",
              "Pool._handle_workers", "Pool._handle_tasks", "Pool._handle_results"}
# Signals a parent or gpuscope sends on purpose (pool.terminate(), Stop): no finding.
EXPECTED_SIGNALS = {signal.SIGTERM, signal.SIGINT}
BAD_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL}


@dataclass
class ProcessFacts:
    """What the ``I`` lines said, per process (pid of the log's writer)."""

    fork_threads: dict[int, list[dict]] = field(default_factory=dict)   # pid -> records, in order
    child_exits: dict[int, int] = field(default_factory=dict)          # child pid -> exit code
    exit_parent: dict[int, int] = field(default_factory=dict)          # child pid -> parent pid
    events: RunEvents | None = None                                    # the run's reader the scans go on with
    cursor: int = 0                                                    # its records taken so far
    forked: set[int] = field(default_factory=set)                      # fork children (their H line)
    roles: dict[int, str] = field(default_factory=dict)                # pid -> role (H, then I lines)


def scan_info(source: RunEvents | str | os.PathLike[str], facts: ProcessFacts) -> bool:
    """Take what the event logs' identity records said since the last scan (the run's reader,
    ``source``, or the events folder: a reader of it is kept in ``facts``); True if a fork with
    threads, a child's exit or a role was new."""
    from gpuscope.trace.events import RunEvents

    if isinstance(source, RunEvents):
        facts.events = source
    elif facts.events is None:
        facts.events = RunEvents(os.path.dirname(os.path.normpath(os.fspath(source))))
    facts.events.refresh(ranges=False)
    facts.cursor, records = facts.events.records_since(facts.cursor)
    new = False
    for pid, kind, _, value in records:
        if kind == "H":
            _header(value, pid, facts)
        elif kind == "I" and any(k in value for k in KEYS):
            new |= _take(value, pid, facts)
    return new


def _header(head: dict, pid: int, facts: ProcessFacts) -> None:
    if head.get("forked"):
        facts.forked.add(pid)
    if head.get("role"):
        facts.roles[pid] = str(head["role"])


def _take(info: dict, pid: int, facts: ProcessFacts) -> bool:
    if info.get("role"):
        facts.roles[pid] = str(info["role"])
    if "fork_threads" in info:
        facts.fork_threads.setdefault(pid, []).append(info["fork_threads"])
    for child, code in (info.get("child_exits") or {}).items():
        facts.child_exits[int(child)] = int(code)
        facts.exit_parent[int(child)] = pid
    return True


def _user_threads(record: dict) -> list[dict]:
    if any(s in str(record.get("forking_thread", "")) for s in ("_handle_workers", "_handle_tasks")):
        return []          # a pool replacing a worker from its own thread
    return [t for t in record.get("threads", ()) if (t.get("target") or "") not in MP_TARGETS
            and not str(t.get("name", "")).startswith("gpuscope")]


def fork_with_threads(facts: ProcessFacts, roles: dict[int, str] | None = None) -> list[Finding]:
    """A process forked while other threads of its own ran: a lock one of them held stays locked in the child."""
    out = []
    roles = roles or {}
    for pid, records in sorted(facts.fork_threads.items()):
        risky = [(r, _user_threads(r)) for r in records]
        risky = [(r, t) for r, t in risky if t]
        if not risky:
            continue

        first, threads = risky[0]
        names = sorted({t["name"] + (f" ({t['target']})" if t.get("target") else "") for _, ts in risky for t in ts})
        from gpuscope.fix import SetStartMethod   # loaded with the finding that offers it, not with every run's rules
        out.append(Finding(
            "fork-with-threads",
            f"{roles.get(pid, 'process')} {pid} forked {len(risky)} time(s) while other threads ran: "
            f"{', '.join(names[:4])}{' …' if len(names) > 4 else ''}; a lock held by one of them at the fork "
            "stays locked forever in the child (deadlock), and so does any library state they were changing",
            "use the spawn or forkserver start method (or start the threads after the pool)",
            Severity.WARNING, (pid,),
            evidence({"forks with threads": len(risky), "other threads": len(threads)},
                     [f"thread {n}" for n in names[:16]], [pid]),
            SetStartMethod("spawn"), first.get("t_wall_ns")))
    return out


def memory_events_path(proc_cgroup: str | None = None, root: str = "/sys/fs/cgroup") -> str | None:
    """Where this process's cgroup counts OOM kills (the run's processes share it), or None:
    cgroup v2 ``memory.events``, else v1 ``memory.oom_control`` (its own path, or the namespace's
    root as a container mounts it); both have an ``oom_kill N`` line."""
    candidates = []
    try:
        for line in _read_text(proc_cgroup or pid_path("self", "cgroup")).splitlines():
            _, controllers, rel = line.split(":", 2)
            rel = rel.strip().lstrip("/")
            if controllers == "":
                candidates.append(os.path.join(root, rel, "memory.events"))
            elif "memory" in controllers.split(","):
                candidates += [os.path.join(root, "memory", rel, "memory.oom_control"),
                               os.path.join(root, "memory", "memory.oom_control")]
    except (OSError, ValueError):
        return None
    return next((c for c in candidates if os.path.isfile(c) and oom_kills(c) is not None), None)


def oom_kills(path: str | os.PathLike[str] | None) -> int | None:
    """The ``oom_kill`` counter of a ``memory.events`` file (processes the OOM killer ended), or None."""
    if path is None:
        return None
    try:
        for line in _read_text(path).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _read_text(path: str | os.PathLike[str]) -> str:
    """A /proc or cgroup file's text (``OSError`` when it cannot be read)."""
    data = read_bytes(os.fspath(path))
    if data is None:
        raise OSError(f"cannot read {path}")
    return data.decode("utf-8", "replace")


def died_by_signal(facts: ProcessFacts, roles: dict[int, str], stopped: bool,
                   extra: dict[int, int] | None = None, oom_killed: int = 0) -> list[Finding]:
    """Children that ended by SIGKILL, SIGSEGV, ...: from multiprocessing's reaping, or torchrun's report.
    ``oom_killed``: how many processes the OOM killer ended in the run's cgroup while it ran (from
    ``memory.events``), which makes a SIGKILL's cause certain."""
    exits = dict(facts.child_exits)
    exits.update(extra or {})
    bad = {}
    for pid, code in exits.items():
        num = -code
        if code >= 0 or num in EXPECTED_SIGNALS or (stopped and num == signal.SIGKILL) or num not in BAD_SIGNALS:
            continue
        bad[pid] = signal.Signals(num)
    if not bad and not oom_killed:
        return []
    if not bad:
        return [Finding(
            "died-by-signal", f"the OOM killer ended {oom_killed} process(es) in the run's cgroup while it ran",
            "the run needs more memory than its cgroup allows: fewer or smaller workers, smaller batches, "
            "shared memory instead of copies", Severity.ERROR, (),
            evidence({"OOM kills": oom_killed}, ["cgroup memory.events: oom_kill +%d" % oom_killed]), None, None)]
    kinds = sorted({s.name for s in bad.values()})
    killed = signal.SIGKILL in bad.values()
    lines = [f"pid {p} ({roles.get(p, 'child')}): {s.name}" for p, s in sorted(bad.items())]
    if oom_killed:
        lines.append(f"cgroup memory.events: oom_kill +{oom_killed} during the run")
    fix = (f"the OOM killer ended {oom_killed} process(es) of the cgroup during the run: fewer or smaller workers, "
           "smaller batches; " if killed and oom_killed else
           "SIGKILL often means the OOM killer (see `dmesg`, or the cgroup's memory.events): fewer or smaller "
           "workers; " if killed else "") + ("SIGSEGV/SIGBUS/SIGABRT: a crash in native code (an extension, "
                                             "CUDA after fork, /dev/shm full for SIGBUS)" if set(kinds) - {"SIGKILL"}
                                             else "a pool.map waiting on a killed worker hangs: prefer "
                                                  "ProcessPoolExecutor, which reports it")
    return [Finding(
        "died-by-signal", f"{len(bad)} process(es) of the run died by {', '.join(kinds)}",
        fix, Severity.ERROR, tuple(sorted(bad)),
        evidence({"processes": len(bad), **({"OOM kills": oom_killed} if oom_killed else {})}, lines, bad),
        None, None)]


# -- the rules' declarations ----------------------------------------------------------------------

@rule("fork-with-threads", inputs=Input.EVENTS, phase={Phase.LIVE, Phase.AFTER},
      title="a process forked while threads of its own were running (locks they held stay held in the child)")
def _fork_with_threads(run: RunInputs) -> list[Finding]:
    return fork_with_threads(run.facts or ProcessFacts(), run.roles)


@rule("child-died-by-signal", codes=("died-by-signal",), inputs={Input.EVENTS, Input.OUTPUT, Input.PROCS},
      phase={Phase.LIVE, Phase.AFTER}, on_stop=OnStop.KEEP,
      title="children died by SIGKILL, SIGSEGV, ... (multiprocessing's reaping, torchrun's report, OOM kills)")
def _died_by_signal(run: RunInputs) -> list[Finding]:
    torchrun = run.scanner.torchrun_exits if run.scanner is not None else None
    return died_by_signal(run.facts or ProcessFacts(), run.roles, run.stopped, torchrun, run.oom_killed)


declare("no-progress", inputs={Input.TELEMETRY, Input.OUTPUT, Input.EVENTS, Input.STACKS}, phase=Phase.LIVE,
        title="looks stuck: CPU near zero, no output and no new ranges while processes live",
        module="gpuscope.findings.recorder")
