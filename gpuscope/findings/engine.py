"""Findings of a finished run, from its folder: event logs, stderr, the summary and the live findings.

``analyse_run(run_dir)`` is what ``gpuscope findings RUN_ID`` and the end of a run use. Rules that
only the live recorder can see (no progress, leftover shared memory seen in the processes' maps)
are kept in ``findings.json`` by :class:`gpuscope.findings.recorder.FindingsRecorder` and merged.
"""

from __future__ import annotations

import os

from gpuscope import jsontext, rundir
from gpuscope.findings import process_rules
from gpuscope.findings.output_rules import OutputScanner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuscope.finding import Finding

FINDINGS_FILE = "findings.json"
STDERR_LIMIT = 64 << 20       # read at most this much of stderr.log (its last bytes)


def read_saved(run_dir: str | os.PathLike[str]) -> list[Finding]:
    """The findings saved in the run folder (by the live recorder), or []."""
    try:
        rows = jsontext.read(os.path.join(run_dir, FINDINGS_FILE))
    except (OSError, ValueError):
        return []
    out = []
    from gpuscope.finding import Finding
    for row in rows.get("findings", []) if isinstance(rows, dict) else []:
        try:
            out.append(Finding.from_dict(row))
        except (KeyError, ValueError, TypeError):
            continue
    return out


def save(run_dir: str | os.PathLike[str], findings: list[Finding], extra: dict[str, Any] | None = None) -> None:
    data = {"findings": [f.to_dict() for f in findings], **(extra or {})}
    tmp = os.path.join(run_dir, FINDINGS_FILE + ".tmp")
    jsontext.write(tmp, data, indent=1)
    os.replace(tmp, os.path.join(run_dir, FINDINGS_FILE))


def scan_stderr(path: str | os.PathLike[str]) -> OutputScanner:
    scanner = OutputScanner()
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - STDERR_LIMIT))
            while chunk := fh.read(1 << 20):
                scanner.feed(chunk)
    except OSError:
        pass
    scanner.finish()
    return scanner


def _summary(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        return jsontext.read(os.path.join(run_dir, rundir.SUMMARY))
    except (OSError, ValueError):
        return {}


def root_signal(summary: dict[str, Any], roles: dict[int, str]) -> list[Finding]:
    """The program's first process itself died by a signal (not a Stop)."""
    sig = summary.get("signal")
    if not sig or summary.get("status") == "stopped" or sig in ("SIGTERM", "SIGINT"):
        return []
    root = next((p for p, r in roles.items() if r in ("main", "torchrun agent")), None)
    from gpuscope.finding import Finding, Severity, evidence
    return [Finding("died-by-signal", f"the program's first process died by {sig}",
                    "SIGKILL often means the OOM killer (see `dmesg`); SIGSEGV a crash in native code",
                    Severity.ERROR, (root,) if root else (), evidence({}, [f"exit: {sig}"], [root] if root else []))]


def left_running(summary: dict[str, Any]) -> list[Finding]:
    """Processes alive after the run ended by itself that are still alive now (a resource tracker
    finishing its clean-up a moment later is no finding)."""
    from gpuscope.runs.procscan import alive, has_run_tag

    run_id = str(summary.get("run_id", ""))
    pids = tuple(sorted(int(p) for p in summary.get("left_running") or () if alive(int(p))
                        and has_run_tag(int(p), run_id)))
    if not pids:
        return []
    from gpuscope.finding import CleanupPids, Finding, Severity, evidence
    return [Finding("left-running", f"{len(pids)} process(es) of the run were still running after it ended",
                    "stop them (Cleanup tab, or `gpuscope cleanup`); a daemon thread or a detached child "
                    "usually keeps them", Severity.WARNING, pids, evidence({"processes": len(pids)}, (), pids),
                    CleanupPids(pids))]


def nsys_findings(summary: dict[str, Any]) -> list[Finding]:
    rows = ((summary.get("nsys") or {}).get("findings")) or []
    from gpuscope.finding import Finding
    return [Finding.from_dict({**r, "source": "nsys"}) for r in rows if isinstance(r, dict) and "code" in r]


def analyse_events(run_dir: str | os.PathLike[str], events: list | None = None, *, stopped: bool = False,
                   scanner: OutputScanner | None = None, oom_killed: int = 0,
                   facts: process_rules.ProcessFacts | None = None) -> list[Finding]:
    """Findings from the event logs and stderr (no summary needed: usable before it is written).
    ``oom_killed``: OOM kills the run's cgroup counted while it ran (the live recorder knows it);
    ``facts``: what the live recorder's scans of the logs gathered (only what they have not read
    yet is read here)."""
    from gpuscope.trace.events import read_run_events

    events = read_run_events(run_dir) if events is None else events
    roles = {pe.pid: pe.role for pe in events}
    facts = process_rules.ProcessFacts() if facts is None else facts
    process_rules.scan_info(os.path.join(run_dir, rundir.EVENTS), facts)
    scanner = scanner if scanner is not None else scan_stderr(os.path.join(run_dir, rundir.STDERR))
    output = scanner.findings()
    found = (output + process_rules.fork_with_threads(facts, roles)
             + process_rules.died_by_signal(facts, roles, stopped, scanner.torchrun_exits, oom_killed)
             + _rules_with_input(run_dir, events, output))
    if any(f.code == "cuda-after-fork" for f in found):
        from gpuscope.findings import torch_rules

        found = torch_rules.merge_cuda_message(found)
    return found


def load_rules() -> None:
    """Import the rules :func:`_rules_with_input` may need, ahead (the live recorder calls it once
    a run has several processes: the end of the run then does not wait for their imports)."""
    from gpuscope.findings import ddp_rules, ipc_rules, pool_rules, ray_rules, torch_rules  # noqa: F401


def _rules_with_input(run_dir: str | os.PathLike[str], events: list, output: list[Finding]) -> list[Finding]:
    """The rules of pools, pickles, torch, ranks and Ray, each imported only when the run has what
    it reads (issue 14.4: a run without them, the usual short one, imports none of five modules).
    Each test is the one its rule makes first, so a rule left out would have found nothing."""
    found: list[Finding] = []
    if any(pe.role == "pool worker" for pe in events):
        from gpuscope.findings import pool_rules

        found += pool_rules.pool_findings(events)
    if any(pe.pickled for pe in events):
        from gpuscope.findings import ipc_rules

        found += ipc_rules.large_pickles(events)
    if any(pe.cuda_at_fork or pe.sampler_epochs for pe in events):
        from gpuscope.findings import torch_rules

        found += torch_rules.cuda_after_fork(events, output) + torch_rules.sampler_epoch_not_set(events)
    if sum(pe.role.startswith("rank ") for pe in events) >= 2:
        from gpuscope.findings import ddp_rules

        found += ddp_rules.stragglers(events)
    if os.path.exists(os.path.join(run_dir, rundir.RAY_STORE)):
        from gpuscope.findings import ray_rules

        found += ray_rules.object_store_findings(run_dir)
    return found


def analyse_run(run_dir: str | os.PathLike[str]) -> list[Finding]:
    """Every finding of a finished run, one list: recomputed from the folder, plus the saved live ones."""
    from gpuscope.trace.events import read_run_events

    summary = _summary(run_dir)
    events = read_run_events(run_dir)
    roles = {pe.pid: pe.role for pe in events}
    found = analyse_events(run_dir, events, stopped=summary.get("status") == "stopped")
    found += root_signal(summary, roles) + left_running(summary) + nsys_findings(summary)
    saved = read_saved(run_dir)
    if any(f.code == "cuda-after-fork" and f.pids for f in found):   # the live stderr-only one is merged in
        saved = [f for f in saved if not (f.code == "cuda-after-fork" and not f.pids)]
    from gpuscope.finding import merge
    return merge(saved + found)
