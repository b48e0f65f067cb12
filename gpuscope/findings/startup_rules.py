"""Rules on how a run's children start: ``spawn-main-reimport``.

A spawn child (and the forkserver, once) runs the script again as ``__mp_main__`` before it gets
its first task; everything the script imports at module level is imported again in every worker.
The hook times that re-import and the modules it imports (``U`` lines, inject/reimport.py). When
the re-import is a large share of the time from ``Process.start()`` to the first task, the finding
names the time and the slowest modules, and the fixes.
"""

from __future__ import annotations

from typing import NamedTuple

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.findings.registry import Input, RunInputs, rule
from gpuscope.trace.events import ProcessEvents

MIN_REIMPORT_S = 0.05    # a script without heavy imports re-imports in a few ms
SHARE = 0.3              # of the time to the first task
TOP = 5


class Start(NamedTuple):
    """One child's way to its first task."""

    pid: int
    method: str
    reimport_ns: int
    to_first_ns: int                      # from Process.start() (else its own start) to its first task
    modules: tuple[tuple[str, int], ...]


def _first_work(pe: ProcessEvents) -> int | None:
    """Its first task's start, else its first range's, else its end."""
    if pe.range_count:
        tasks = [nid for nid, n in pe.names.items() if n.kind == "task"]
        for nids in ([tasks] if tasks else []) + [None]:
            starts, _ = pe.range_times(nids)     # in start order (a list, or an array for a big log)
            if len(starts):
                return int(starts[0])
    return pe.end_ns


def starts(events: list[ProcessEvents]) -> list[Start]:
    """The children whose start included a re-import of ``__main__``: their own (spawn; forkserver
    children too where the server does not preload ``__main__``, as CPython 3.11's does not), or
    their forkserver's (once; its first children wait for it)."""
    called = {pid: t for pe in events for t, _, pid, _ in pe.children}
    by_pid = {pe.pid: pe for pe in events}
    out = []
    for pe in events:
        own = pe.main_reimport
        server = by_pid.get(pe.ppid or -1)
        via = own if own is not None else (server.main_reimport if server is not None else None)
        if via is None or pe.role in ("forkserver", "resource tracker"):
            continue
        first = _first_work(pe)
        ref = called.get(pe.pid, pe.start_ns if own is not None else via[0])
        if first is None or first <= ref:
            continue
        t0, t1, info = via
        modules = tuple((str(n), int(ns)) for n, ns in info.get("modules") or () if isinstance(ns, int))
        method = pe.start_method if own is not None and pe.start_method == "forkserver" else (
            "spawn" if own is not None else "forkserver")
        out.append(Start(pe.pid, method, t1 - t0, first - ref, modules))
    return out


def _median(values: list[int]) -> float:
    ordered, half = sorted(values), len(values) // 2
    return float(ordered[half]) if len(values) % 2 else (ordered[half - 1] + ordered[half]) / 2


def _slowest(group: list[Start]) -> list[tuple[str, float]]:
    """Modules by their median time over the children that imported them, slowest first."""
    per: dict[str, list[int]] = {}
    for s in group:
        for name, ns in s.modules:
            per.setdefault(name, []).append(ns)
    return sorted(((n, _median(v)) for n, v in per.items()), key=lambda kv: -kv[1])[:TOP]


def reimport_finding(group: list[Start]) -> Finding | None:
    method = group[0].method
    reimport, to_first = _median([s.reimport_ns for s in group]), _median([s.to_first_ns for s in group])
    share = reimport / to_first
    if reimport < MIN_REIMPORT_S * 1e9 or share < SHARE:
        return None
    slow = _slowest(group)
    named = ", ".join(f"{n} {ns / 1e6:.0f} ms" for n, ns in slow) or "no module of its own"
    modules = ", ".join(f'"{n}"' for n, _ in slow)
    pids = tuple(sorted(s.pid for s in group))
    who = f"{len(group)} {method} child(ren) re-imported __main__ before their first task"
    fix = ("move the imports the workers do not need under `if __name__ == \"__main__\":`, or into the "
           "function that needs them; or use forkserver"
           + (f" with multiprocessing.set_forkserver_preload([{modules}])" if modules else "")
           + " so the server imports them once and its children start with them; or keep one pool alive "
           "across the program's tasks")
    from gpuscope.fix import SetForkserverPreload   # loaded with the finding that offers it, not with every run's rules
    return Finding(
        "spawn-main-reimport",
        f"{who}: {reimport / 1e6:.0f} ms of {to_first / 1e6:.0f} ms to the first task ({share * 100:.0f} %); "
        f"slowest imports: {named}",
        fix, Severity.WARNING, pids,
        evidence({"re-import ms": round(reimport / 1e6, 1), "to first task ms": round(to_first / 1e6, 1),
                  "share": round(share, 3), "processes": len(group)},
                 [f"{n}: {ns / 1e6:.1f} ms" for n, ns in slow], pids),
        SetForkserverPreload(tuple(n for n, _ in slow)) if slow else None)


@rule("spawn-main-reimport", inputs=Input.EVENTS, supersedes=("startup-dominated",),
      applies=lambda run: any(pe.main_reimport is not None for pe in run.events),
      title="spawn/forkserver children spent much of their start re-importing __main__'s imports")
def _spawn_main_reimport(run: RunInputs) -> list[Finding]:
    groups: dict[str, list[Start]] = {}
    for s in starts(run.events):
        groups.setdefault(s.method, []).append(s)
    return [f for _, g in sorted(groups.items()) if (f := reimport_finding(g)) is not None]
