"""The human-readable run summary printed after ``gpuscope run``."""

from __future__ import annotations

from typing import Any


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.1f} ms" if ns < 10_000_000_000 else f"{ns / 1e9:.1f} s"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _cpu(p: dict[str, Any]) -> str:
    value = p.get("cpu_seconds")
    return "-" if value is None else f"{value:.2f} s"


def _rss(p: dict[str, Any]) -> str:
    value = p.get("peak_rss_bytes")
    return "-" if value is None else f"{value / 2**20:.0f} MiB"


def _not_injected(name: str) -> str:
    if name.startswith(("nsys", "QdstrmImporter")):
        return f"({name}: Nsight Systems)"
    return f"({name}: not reached by gpuscope: not Python, or started with -I/-E/-S)"


def format_table(result: Any) -> str:
    """Header line, one row per process, then notes about processes left behind."""
    duration = (result.ended_ns - result.started_ns) / 1e9
    outcome = {"stopped": "was stopped", "exited": "exited", "failed": "failed", "error": "failed"}[result.status]
    lines = [f"gpuscope: run {result.run_id} {outcome} ({result.exit.describe()}) after {duration:.2f} s",
             f"gpuscope: folder {result.run_dir}"]
    header = (f"  {'PID':>7}  {'ROLE':<16} {'METHOD':<10} {'RANK':>4} {'LIFETIME':>9} {'EXIT':>5} "
              f"{'CPU':>7} {'PEAK RSS':>9} {'RANGES':>7}  TOP RANGES")
    lines.append(header)
    for p in result.processes:
        life = f"{p['lifetime_s']:.2f} s" if p.get("lifetime_s") is not None else "-"
        top = ", ".join(f"{t['name']} ×{t['count']} {_ms(t['total_ns'])}" for t in p.get("top_ranges", [])[:2])
        if p["role"] == "not injected":
            top = _not_injected(p.get("name") or "?")
        lines.append(f"  {p['pid']:>7}  {p['role'][:16]:<16} {_cell(p.get('start_method'))[:10]:<10} "
                     f"{_cell(p.get('rank')):>4} {life:>9} {_cell(p.get('exit_code')):>5} {_cpu(p):>7} {_rss(p):>9} "
                     f"{p['ranges']:>7}  {top}")
    if not result.processes:
        lines.append("  (no process reported to gpuscope: was the interpreter started with -I, -E or -S?)")
    if result.left_running:
        lines.append(f"gpuscope: still running after the run ended (not killed; see `gpuscope cleanup`): "
                     f"{', '.join(map(str, result.left_running))}")
    if result.escaped:
        lines.append(f"gpuscope: escaped the run's session (double fork / setsid): {', '.join(map(str, result.escaped))}")
    if result.error:
        lines.append(f"gpuscope: {result.error}")
    return "\n".join(lines)
