"""The end-of-run note for ``--annotate``: per pattern, what it matched and the calls recorded.

Each process's hook writes what its patterns matched (``I`` line key ``annotate``) and, at exit,
the closest names for patterns that matched nothing there (``annotate_missed``); each call of a
wrapped function is a range of kind ``func`` named by its label (docs/EVENTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuscope.trace.events import ProcessEvents, read_run_events


@dataclass
class PatternResult:
    """What one ``--annotate`` pattern matched over the run, and what to try when nothing."""

    pattern: str
    functions: set[str] = field(default_factory=set)
    calls: int = 0
    processes: int = 0
    suggestions: list[str] = field(default_factory=list)

    def note(self) -> str:
        if self.functions:
            names = ", ".join(sorted(self.functions)[:4]) + (" ..." if len(self.functions) > 4 else "")
            where = f" in {self.processes} process{'es' if self.processes != 1 else ''}" if self.calls else ""
            return (f"--annotate {self.pattern}: {len(self.functions)} function"
                    f"{'s' if len(self.functions) != 1 else ''} ({names}), {self.calls} call"
                    f"{'s' if self.calls != 1 else ''} recorded{where}")
        hint = f"; did you mean {' or '.join(self.suggestions)}?" if self.suggestions else ""
        return f"warning: --annotate {self.pattern} matched nothing{hint}"


def annotate_results(run_dir: str | Path, patterns: tuple[str, ...] | list[str],
                     events: list[ProcessEvents] | None = None) -> list[PatternResult]:
    """What each pattern matched across the run's processes."""
    events = read_run_events(run_dir) if events is None else events
    results = {p: PatternResult(p) for p in patterns}
    for pe in events:
        for key, labels in (pe.info.get("annotate") or {}).items():
            if key in results:
                results[key].functions.update(labels)
    for pe in events:
        for key, names in (pe.info.get("annotate_missed") or {}).items():
            res = results.get(key)
            if res is not None and not res.functions:
                res.suggestions.extend(n for n in names if n not in res.suggestions)
        for res in results.values():
            calls = _calls(pe, res.functions)
            res.calls += calls
            res.processes += 1 if calls else 0
    for res in results.values():
        res.suggestions = res.suggestions[:3]
    return list(results.values())


def _calls(pe: ProcessEvents, labels: set[str]) -> int:
    ids = [nid for nid, name in pe.names.items() if name.kind == "func" and name.name in labels]
    if not ids or not pe.range_count:
        return 0
    totals = pe.range_totals()
    return sum(totals[nid][0] for nid in ids if nid in totals)


def annotate_notes(run_dir: str | Path, patterns: tuple[str, ...] | list[str],
                   events: list[ProcessEvents] | None = None) -> list[str]:
    """One line per pattern, for the CLI (stderr), ``notes`` in ``--json`` and the app."""
    if not patterns:
        return []
    return [r.note() for r in annotate_results(run_dir, patterns, events)]
