"""The human-readable run summary printed after ``gpuscope run``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.trace.process_row import ProcessRow, display_name

if TYPE_CHECKING:
    from typing import Any

    from gpuscope.runrecord.model import RunRecord


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.1f} ms" if ns < 10_000_000_000 else f"{ns / 1e9:.1f} s"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _sampled(text: str, source: str | None) -> str:
    """A sampled figure is marked ``~`` (the 10 Hz sampler may miss part of a life); exact ones not."""
    return "~" + text if source == "sampled" else text


def _cpu(p: ProcessRow) -> str:
    return "-" if p.cpu_seconds is None else _sampled(f"{p.cpu_seconds:.2f} s", p.cpu_source)


def _rss(p: ProcessRow) -> str:
    return "-" if p.peak_rss_bytes is None else _sampled(f"{p.peak_rss_bytes / 2**20:.0f} MiB", p.rss_source)


def _role(p: ProcessRow) -> str:
    return display_name(p.role, p.worker_id)    # the name every view uses (RANK has its own column)


def _exit(p: ProcessRow) -> str:
    return p.exit_signal or _cell(p.exit_code)


def _not_injected(name: str) -> str:
    if name.startswith(("nsys", "QdstrmImporter")):
        return f"({name}: Nsight Systems)"
    return f"({name}: not reached by gpuscope: not Python, or started with -I/-E/-S)"


def format_table(result: RunRecord) -> str:
    """Header line, one row per process, then notes about processes left behind."""
    duration = (result.ended_ns - result.started_ns) / 1e9
    lines = [f"gpuscope: run {result.run_id} {result.status.outcome} ({result.exit.describe()}) after {duration:.2f} s",
             f"gpuscope: folder {result.run_folder}"]
    header = (f"  {'PID':>7}  {'ROLE':<20} {'METHOD':<10} {'RANK':>4} {'LIFETIME':>9} {'EXIT':>5} "
              f"{'CPU':>7} {'PEAK RSS':>9} {'RANGES':>7}  TOP RANGES")
    lines.append(header)
    rows = list(result.processes)
    for p in rows:
        life = f"{p.lifetime_s:.2f} s" if p.lifetime_s is not None else "-"
        top = ", ".join(f"{t.name} ×{t.count} {_ms(t.total_ns)}" for t in p.top_ranges[:2])
        if not p.injected:
            top = _not_injected(p.name or "?")
        lines.append(f"  {p.pid:>7}  {_role(p)[:20]:<20} {_cell(p.start_method)[:10]:<10} "
                     f"{_cell(p.rank):>4} {life:>9} {_exit(p):>5} {_cpu(p):>7} {_rss(p):>9} "
                     f"{p.ranges:>7}  {top}")
    if any("sampled" in (p.cpu_source, p.rss_source) for p in rows):
        lines.append("  (~ sampled at 10 Hz: the process was not reached by gpuscope's hook, or ended before "
                     "it could measure itself; other figures are exact)")
    if not result.processes:
        lines.append("  (no process reported to gpuscope: was the interpreter started with -I, -E or -S?)")
    if result.left_running:
        lines.append(f"gpuscope: still running after the run ended (not killed; see `gpuscope cleanup`): "
                     f"{', '.join(map(str, result.left_running))}")
    if result.escaped:
        escaped = ", ".join(map(str, result.escaped))
        lines.append(f"gpuscope: escaped the run's session (double fork / setsid): {escaped}")
    if result.error:
        lines.append(f"gpuscope: {result.error}")
    return "\n".join(lines)
