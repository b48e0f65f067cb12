"""``gpuscope findings RUN_ID``: what went wrong in a run, with the evidence and the fix."""

from __future__ import annotations

import argparse
import json
import sys

from gpuscope import numpy_import

DESCRIPTION = (
    "List the findings of a run (by id, unique prefix, or --latest): the rules run again on the run "
    "folder (event logs, stderr, exit statuses, nsys diagnostics) and the findings seen live while it "
    "ran (no progress, leftover shared memory) are added. Exit status 0 either way. --rules lists the "
    "rules instead: what each reads and when it decides."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", help="run id or unique prefix (default: --latest)")
    p.add_argument("--latest", action="store_true", help="the most recent run")
    p.add_argument("--json", action="store_true", help="print {run_id, findings: [...]} as JSON")
    p.add_argument("--rules", action="store_true",
                   help="list the rules (id, phase, inputs, what a stop does, what it finds) and exit")


def format_rules(rules: list) -> str:
    """One line per rule: id, phases, inputs, stop policy, what it finds (and its other codes)."""
    rows = [(r.id, "+".join(p.value for p in _phase_order(r.phases)), ",".join(sorted(i.value for i in r.inputs)),
             r.on_stop.value, r.title + (f" [codes: {', '.join(r.codes)}]" if r.codes else "")) for r in rules]
    widths = [max(len(row[i]) for row in rows + [("RULE", "PHASE", "INPUTS", "STOP", "")]) for i in range(4)]
    head = ("RULE", "PHASE", "INPUTS", "STOP", "FINDS")
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in [head, *rows])


def _phase_order(phases: frozenset) -> list:
    from gpuscope.findings.registry import Phase

    return [p for p in Phase if p in phases]


def format_findings(findings: list) -> str:
    """Lines for a terminal: one per finding, then its evidence and fix, indented."""
    if not findings:
        return "no findings"
    from gpuscope.findings.fixes import describe

    out = []
    for f in findings:
        out.append(f.line())
        numbers = ", ".join(f"{k} {v:g}" for k, v in f.evidence.numbers)
        if numbers:
            out.append(f"    evidence: {numbers}")
        out += [f"    | {line}" for line in f.evidence.excerpts[:8]]
        if f.fix:
            out.append(f"    fix: {f.fix}" + (f" [{describe(f.action)}]" if f.action is not None else ""))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    if args.rules:
        from gpuscope.findings import registry

        rules = registry.rules()
        if args.json:
            sys.stdout.write(json.dumps({"rules": [r.to_dict() for r in rules]}) + "\n")
        else:
            print(format_rules(rules))
        return 0
    numpy_import.preload()   # before anything loads numpy: one BLAS thread, env put back
    from gpuscope.findings.engine import analyse_run
    from gpuscope.findings.runref import resolve

    run_id, run_dir = resolve(args.run, args.latest)
    findings = analyse_run(run_dir)
    if args.json:
        sys.stdout.write(json.dumps({"run_id": run_id, "findings": [f.to_dict() for f in findings]}) + "\n")
    else:
        print(f"run {run_id}")
        print(format_findings(findings))
    return 0
