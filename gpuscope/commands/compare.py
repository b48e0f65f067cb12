"""``gpuscope compare``: runs side by side, with a verdict that never calls noise a result.

Two forms (docs/COMPARE.md):

* ``gpuscope compare RUN_A RUN_B [RUN_C ...]`` compares recorded runs;
* ``gpuscope compare --start-methods fork,spawn[,forkserver] [--repeat N] [run options] SCRIPT
  [ARGS...]`` runs SCRIPT under each method, alternated, then compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpuscope import numpy_import
from gpuscope.errors import UserError

DESCRIPTION = (
    "Compare runs side by side. Either give recorded run ids (RUN_A RUN_B [RUN_C ...]), or "
    "--start-methods fork,spawn[,forkserver] and a script: gpuscope runs it under each method, "
    "alternated (A B A B …) --repeat times, and compares. A difference is called a result only when "
    "the repeats' min–max ranges do not overlap (beyond noise)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from gpuscope.commands.run import add_nsys_options

    p.add_argument("--start-methods", metavar="M1,M2[,M3]",
                   help="run SCRIPT under these start methods (fork, spawn, forkserver) and compare")
    p.add_argument("--repeat", type=int, default=3, help="runs per start method (default 3; alternated)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON on the last line of stdout")
    p.add_argument("--markdown", metavar="FILE", help="also write the comparison as Markdown to FILE")
    p.add_argument("--top", type=int, default=15, help="range names to show (default 15)")
    g = p.add_argument_group("run options (with --start-methods)")
    g.add_argument("--python", help="interpreter to run the script with (default: this one)")
    g.add_argument("--cwd", help="working directory")
    g.add_argument("--annotate", action="append", default=[], metavar="MODULE:QUALNAME",
                   help="add a range around matching functions (globs allowed); repeatable")
    g.add_argument("--interval", type=float, default=0.1, help="telemetry sampling interval in s (0.02-1)")
    g.add_argument("--output-cap-mb", type=float, default=None, metavar="MB",
                   help="keep at most MB of each saved output stream")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    add_nsys_options(g, "each run", "each program")
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS]",
                   help="with --start-methods: run a module as `python -m MODULE`")
    p.add_argument("script", nargs="?", metavar="RUN_A|SCRIPT",
                   help="a run id (or unique prefix), or with --start-methods the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="RUN_B ...|ARGS",
                   help="more run ids, or with --start-methods the script's arguments")


def _recorded_ids(args: argparse.Namespace) -> list[str]:
    """The run ids; options written after them (``A B --json``) are taken out of the ids."""
    rest = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    rest.add_argument("--json", action="store_true")
    rest.add_argument("--markdown")
    rest.add_argument("--top", type=int)
    try:
        extra, unknown = rest.parse_known_args(list(args.args))
    except (argparse.ArgumentError, SystemExit):
        raise UserError("compare: bad option after the run ids (see gpuscope compare --help)") from None
    args.json = args.json or extra.json
    args.markdown = extra.markdown or args.markdown
    args.top = extra.top if extra.top is not None else args.top
    bad = [u for u in unknown if u.startswith("-")]
    if bad:
        raise UserError(f"compare: {bad[0]} is an option of a run (use it with --start-methods SCRIPT)")
    if args.module is not None:
        raise UserError("compare: -m MODULE needs --start-methods (to compare recorded runs, give run ids)")
    ids = ([args.script] if args.script else []) + unknown
    if len(set(ids)) < 2:
        raise UserError("compare needs at least two run ids (see `gpuscope history`), or --start-methods "
                        "fork,spawn SCRIPT to run and compare")
    return ids


def run(args: argparse.Namespace) -> int:
    numpy_import.preload()   # before anything loads numpy: one BLAS thread, env put back
    if args.start_methods:
        comp, code = _run_series(args)
        if comp is None:
            return code
    else:
        from gpuscope.analysis.comparison import compare_recorded

        comp, code = compare_recorded(_recorded_ids(args)), 0
    if args.markdown:
        try:
            with open(args.markdown, "w", encoding="utf-8") as fh:
                fh.write(comp.to_markdown())
        except OSError as exc:
            raise UserError(f"cannot write {args.markdown}: {exc.strerror or exc}") from None
    if args.json:
        sys.stdout.write(json.dumps(comp.to_json()) + "\n")
        sys.stdout.flush()
    else:
        print(format_text(comp, args.top))
    return code


def _run_series(args: argparse.Namespace) -> tuple[Any, int]:
    from gpuscope.analysis.comparison import compare_runs
    from gpuscope.commands.run import output_cap, spec_from_args, stop_on_signals
    from gpuscope.runs.series import StartMethodSeries, parse_methods

    methods = parse_methods(args.start_methods)
    args.start_method, args.launcher, args.nproc = "default", "python", 1

    def say(message: str) -> None:
        if not args.quiet:
            print(f"gpuscope: {message}", file=sys.stderr, flush=True)

    def progress(i: int, n: int, method: str, rep: int) -> None:
        say(f"run {i} of {n}: {method}, repeat {rep}")

    series = StartMethodSeries(spec_from_args(args), methods, args.repeat, progress=progress,
                               run_kwargs={"output_cap_bytes": output_cap(args)})
    with stop_on_signals(series.stop, say, "stopping the series (Ctrl-C again to kill the run at once)"):
        groups = series.run()
    _save_series(groups, series, methods, say)
    for result in series.results:
        if not result.status.ok:
            say(f"run {result.run_id} {result.status}" + (f": {result.error}" if result.error else "")
                + f" (its output: {result.run_dir})")
    done = sum(len(v) for v in groups.values())
    if series.stopped:
        say(f"series stopped after {done} of {len(series.plan())} runs")
        if sum(1 for ids in groups.values() if ids) < 2:
            print("gpuscope: nothing to compare: the series was stopped before two start methods had a run",
                  file=sys.stderr, flush=True)
            return None, 130
    comp = compare_runs({label: ids for label, ids in groups.items() if ids})
    return comp, 130 if series.stopped else 0


def _save_series(groups: dict[str, list[str]], series: Any, methods: list[str], say: Any) -> None:
    """Record which runs formed the series, so History shows it as one entry (as the app's series)."""
    from gpuscope.views.series_index import save_series

    if sum(len(ids) for ids in groups.values()):
        try:
            save_series(groups, series.spec, methods, series.repeat)
        except OSError as exc:   # the comparison still stands; History lists the runs one by one
            say(f"could not record the series for History: {exc.strerror or exc}")


# -- text -------------------------------------------------------------------------------------------
def _noise(beyond: bool, spreads: Any) -> str:
    """BEYOND noise, within noise, or "1 run" when some label has a single run (the rule cannot tell)."""
    if beyond:
        return "BEYOND"
    return "within" if all(s is None or s.n >= 2 for s in spreads) else "1 run"


def format_text(comp: Any, top: int = 15) -> str:
    from gpuscope.analysis.verdict import fmt, fmt_spread

    labels = comp.labels
    width = max(30, *(len(label) + 2 for label in labels))
    lines = [f"verdict: {comp.verdict}"]
    for w in comp.warnings:
        lines.append(f"warning: {w}")
    lines.append("")
    head = f"{'':<34}" + "".join(f"{label:>{width}}" for label in labels) + f"{labels[1] + '/' + labels[0]:>14}  noise"
    lines.append(head)
    lines.append(f"{'runs':<34}" + "".join(f"{len(comp.usable_runs(label)):>{width}}" for label in labels))
    for m in comp.metrics:
        cells = "".join(f"{fmt_spread(m.values.get(label), m.unit):>{width}}" for label in labels)
        r = "-" if m.ratio is None else f"{m.ratio:.2f}×"
        lines.append(f"{m.title[:33]:<34}{cells}{r:>14}  {_noise(m.beyond_noise, m.values.values())}")
    for note in comp.notes:
        lines.append(f"note: {note}")
    if comp.breakdown:
        lines.append("")
        lines.append(f"{'where the wall time goes (ms)':<34}" + "".join(f"{label:>{width}}" for label in labels))
        for m in comp.breakdown:
            cells = "".join(f"{fmt_spread(m.values.get(label), m.unit):>{width}}" for label in labels)
            r = "-" if m.ratio is None else f"{m.ratio:.2f}×"
            lines.append(f"{m.title[:33]:<34}{cells}{r:>14}  {_noise(m.beyond_noise, m.values.values())}")
    if comp.ranges:
        lines.append("")
        lines.append(f"{'range (count, total)':<34}" + "".join(f"{label:>{width}}" for label in labels)
                     + f"{'ratio':>14}  noise")
        for r in comp.ranges[:top]:
            texts = (f"{r.values[label]['count']}, {fmt(r.values[label]['total_ns'] / 1e6, 'ms')}" for label in labels)
            cells = "".join(f"{text:>{width}}" for text in texts)
            ratio = "-" if r.ratio is None else f"{r.ratio:.2f}×"
            runs = min(v["n"] for v in r.values.values())
            lines.append(f"{r.name[:33]:<34}{cells}{ratio:>14}  "
                         f"{'BEYOND' if r.beyond_noise else 'within' if runs >= 2 else '1 run'}")
        if len(comp.ranges) > top:
            lines.append(f"... {len(comp.ranges) - top} more (--top)")
    if comp.startup:
        lines.append("")
        lines.append("start-up of each worker (ms since the parent's start() call; representative run):")
        for w in comp.startup:
            phases = ", ".join(f"{name} {ms:.1f}" for name, ms in w.phases[1:])
            lines.append(f"  {w.label:<12} pid {w.pid:<8} {w.role:<16} {phases}")
    lines.append("")
    lines.append("runs: " + "; ".join(f"{label}: {' '.join(ids)}" for label, ids in comp.runs.items()))
    return "\n".join(lines)
