"""``gpuscope report``: summaries of an Nsight Systems report or a gpuscope run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuscope import numpy_import
from gpuscope.errors import UserError
from gpuscope.views.report_json import SUMMARY_KEYS, no_data, to_json

DESCRIPTION = (
    "Print per-process NVTX coverage and the summaries `nsys stats` would print (nvtx_sum, "
    "cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, osrt_sum) for a .nsys-rep, a .sqlite "
    "export, or a gpuscope run (folder or run id)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help=".nsys-rep, .sqlite export, run folder or run id")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--perfetto", metavar="OUT.json", help="also write a Perfetto/Chrome trace")
    parser.add_argument("--run", metavar="RUN_ID", help="a gpuscope run (id or unique prefix) from the store")
    parser.add_argument("--no-cache", action="store_true", help="do not use or write the parsed-report cache")
    parser.add_argument("--job", metavar="ID", help="a job folder holding several jobs' node runs: the job to merge")
    parser.add_argument("--step", metavar="NAME", help="a job: the range whose durations compare the ranks "
                        "(stragglers; default: the longest range every rank repeats)")
    parser.add_argument("--redact", metavar="OUT.sqlite", help="write a shareable copy of the .sqlite export "
                        "without the program's environment and arguments (see docs/STORE.md) and exit")
    parser.add_argument("--torch-ops", action="store_true", help="the run's PyTorch profiler tables: per rank "
                        "key_averages, operators over ranks, steps and the straggler (docs/TORCH-PROFILER.md)")
    parser.add_argument("--rank", type=int, metavar="N", help="with --torch-ops: only this rank")
    parser.add_argument("--sort", default="self_cpu", choices=("self_cpu", "cpu_total", "self_cuda", "cuda_total"),
                        help="with --torch-ops: the column the tables are sorted by (default self_cpu)")
    parser.add_argument("--shapes", action="store_true", help="with --torch-ops: group the rows by input shapes")


def resolve(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """(what to load, run folder for coverage or None)."""
    from gpuscope.views.report_json import resolve as resolve_target

    return resolve_target(args.run, args.path)


def _redact(args: argparse.Namespace) -> int:
    """``--redact OUT``: the export without the environment and arguments (gpuscope.nsys.redact)."""
    from gpuscope.nsys import redact

    target, _ = resolve(args)
    src = redact.export_for(target)
    removed = redact.redact_export(src, Path(args.redact))
    print(f"wrote {args.redact}: {src} without the program's environment and arguments "
          f"({removed} row(s) removed or rewritten)")
    return 0


def run(args: argparse.Namespace) -> int:
    numpy_import.preload()   # before anything loads numpy: one BLAS thread, env put back
    if args.redact:
        return _redact(args)
    if getattr(args, "torch_ops", False):
        return _torch_ops(args)
    target, run_dir = resolve(args)
    from gpuscope.attach import report as attached
    if target.is_dir() and attached.is_attached(target):       # gpuscope attach's session: no logs, no export
        print(json.dumps(attached.report_json(target), indent=1) if args.json else attached.report_text(target))
        if args.perfetto:                                      # its profile's sampled lanes
            from gpuscope.trace import perfetto
            from gpuscope.views.attach_flame import timeline_report
            try:
                perfetto.write(timeline_report(target).timeline, args.perfetto)
            except OSError as exc:
                raise UserError(f"cannot write {args.perfetto}: {exc.strerror}") from None
        return 0
    report = _load(target, run_dir, args)
    why = no_data(report)
    if why:
        raise UserError(why)
    if args.perfetto:
        from gpuscope.torchtrace.perfetto import run_events
        from gpuscope.trace import perfetto
        tl = report.timeline
        folder = run_dir or target
        torch_dir = str(folder) if folder.is_dir() and not tl.torch_rows else None   # not twice when attached
        try:
            perfetto.write(tl, args.perfetto, extra=run_events(torch_dir, tl.wall_base_ns, tl.mono_base_ns))
        except OSError as exc:
            raise UserError(f"cannot write {args.perfetto}: {exc.strerror}") from None
    if args.json:
        json.dump(to_json(report), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print_text(report, sys.stdout)
        if args.perfetto:
            print(f"\nPerfetto trace written to {args.perfetto} (open it in https://ui.perfetto.dev)")
    return 0


def _torch_ops(args: argparse.Namespace) -> int:
    """``--torch-ops``: the run's torch profiler tables (gpuscope.torchtrace.report)."""
    from gpuscope.torchtrace import report as torch_report

    target, run_dir = resolve(args)
    folder = run_dir or target
    if not folder.is_dir():
        raise UserError(f"{folder}: --torch-ops reads a gpuscope run (folder or id), not a file")
    ops = torch_report.torch_ops(folder, rank=args.rank, sort=args.sort, by_shapes=args.shapes)
    if args.json:
        json.dump(torch_report.to_json(ops), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        torch_report.print_text(ops, sys.stdout)
    return 0


def _load(target: Path, run_dir: Path | None, args: argparse.Namespace):
    """The report of ``target``: a job folder merged with ``--job`` / ``--step``, else ``load_report``."""
    from gpuscope.views.report_json import load

    return load(target, run_dir, getattr(args, "job", None), getattr(args, "step", None),
                use_cache=not args.no_cache)


def _table(rows: list[list[str]], out) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, r in enumerate(rows):
        out.write("  ".join(c.rjust(w) if i and j else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        out.write("\n")


def _summary_table(title: str, rows, out) -> None:
    if not rows:
        return
    out.write(f"\n{title}\n")
    head = ["Time (%)", "Total (ns)", "Count", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)"]
    from gpuscope.trace.summary import source_text

    marked = any(r.source for r in rows)     # rows from gpuscope's records of processes nsys missed
    body = [[f"{r.time_pct:.1f}", f"{r.total_ns:,}", f"{r.count:,}", f"{r.avg_ns:,.1f}", f"{r.med_ns:,.1f}",
             f"{r.min_ns:,}", f"{r.max_ns:,}", f"{r.stddev_ns:,.1f}"]
            + ([r.style] if r.style else []) + ([source_text(r)] if marked else []) + [r.name or ""] for r in rows]
    _table([head + (["Style"] if rows[0].style else []) + (["Source"] if marked else []) + ["Name"]] + body, out)


def print_text(report, out) -> None:
    version = report.nsys_version or "unknown"
    if getattr(report, "job", None) is not None and report.nsys_version is None:
        out.write(f"{report.path}\n  job folder: gpuscope's event logs of each node (no nsys report)\n")
    else:
        out.write(f"{report.path}\n  nsys {version}, export schema {report.schema_version or '?'}\n")
    procs = [["PID", "Process", "NVTX ranges", "gpuscope ranges", "Marks", "Kernels", "OS calls"]]
    for p in report.processes:
        procs.append([str(p["pid"]), p["name"][:60], str(p["nvtx_ranges"]), str(p["gpuscope_ranges"]),
                      str(p["marks"]), str(p["kernels"]), str(p["osrt_calls"])])
    out.write("\nProcesses\n")
    _table(procs, out)
    if getattr(report, "job", None) is not None:
        _print_job(report.job, out)
    for key, title in SUMMARY_KEYS:
        _summary_table(title, report.summaries.get(key), out)
    from gpuscope.gpu import sharing_report

    for line in sharing_report.text_lines(sharing_report.report_json(report)):
        out.write(line + "\n")
    if report.coverage is not None:
        _print_coverage(report.coverage, out)
    for f in report.findings:
        out.write(f"\n[{getattr(f, 'code', '?')}] {getattr(f, 'message', '')}\n  fix: {getattr(f, 'advice', '')}\n")
    for note in report.notes:
        out.write(f"\nnote: {note}\n")


def _print_coverage(cov, out) -> None:
    out.write("\nCoverage (gpuscope's event logs vs nsys)\n")
    rows = [["PID", "Role", "Start", "gpuscope", "nsys", "Status"]]
    for p in cov.processes:
        rows.append([str(p.pid), p.role, p.start_method or "", str(p.gpuscope_ranges), str(p.nsys_ranges), p.status])
    _table(rows, out)
    for p in cov.missing:
        out.write(f"  pid {p.pid}: {p.lost} range(s) missing in nsys: {p.reason}\n    fix: {p.fix}\n")


def _ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f}"


def _print_job(job: dict, out) -> None:
    """A job across nodes: its nodes with their clock offsets, the ranks, the stragglers."""
    out.write(f"\nJob {job['job_id']}: {len(job['nodes'])} of {job['nnodes']} node(s), {len(job['ranks'])} rank(s)\n")
    rows = [["Node", "Host", "Ranks", "Clock offset (ms)", "Residual (ms)", "Drift (µs)", "Exit", "nsys", "Run"]]
    for n in job["nodes"]:
        drift = n.get("clock_drift_ns")
        rows.append([str(n["node_rank"]), n["host"], ",".join(map(str, n["ranks"])) or "-",
                     "not measured" if n["clock_error"] else _ms(n["clock_offset_ns"]), _ms(n["clock_residual_ns"]),
                     "-" if drift is None else f"{drift / 1e3:+,.1f}",
                     str(n["exit_code"]), "yes" if n["nsys"] else "no", str(n["run_id"])])
    _table(rows, out)
    step = (job.get("stragglers") or {}).get("step")
    rows = [["Rank", "Node", "Host", "PID", "Ranges", "First (ms)", "Last (ms)"]
            + ([f"{step} ×", "median (ms)", "max (ms)"] if step else [])]
    for r in job["ranks"]:
        s = r.get("step") or {}
        rows.append([str(r["rank"]), str(r["node"]["node_rank"]), r["node"]["host"], str(r["pid"]), str(r["ranges"]),
                     _ms(r["first_ns"]), _ms(r["last_ns"])]
                    + ([str(s.get("count", 0)), _ms(s.get("median_ns")), _ms(s.get("max_ns"))] if step else []))
    out.write("\nRanks (times on node 0's clock, from the job's first record)\n")
    _table(rows, out)
    st = job.get("stragglers")
    if st:
        out.write(f"\nStragglers ({st['step']}): median per rank spreads {_ms(st['spread_ns'])} ms; slowest rank "
                  f"{st['slowest_rank']} takes {st['slowest_over_fastest']}× the fastest (rank {st['fastest_rank']})")
        if st.get("end_skew_median_ns") is not None:
            out.write(f"; the ranks end a step {_ms(st['end_skew_median_ns'])} ms apart (median)")
        out.write("\n")
