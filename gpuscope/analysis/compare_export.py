"""A comparison as JSON (`gpuscope compare --json`, the app's export) and as Markdown.

The JSON keys ``runs``, ``metrics`` (``name``, ``unit``, ``values`` {label: {``median``, ``min``,
``max``}}, ``ratio``, ``beyond_noise``), ``ranges`` (``name``, ``values`` {label: {``count``,
``total_ns``}}, ``ratio``, ``beyond_noise``) and ``verdict`` are stable (docs/COMPARE.md); the
others may grow.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gpuscope.analysis.verdict import fmt, fmt_spread

if TYPE_CHECKING:
    from gpuscope.analysis.comparison import Comparison, Metric

FORMAT_VERSION = 1


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def to_json(comp: "Comparison") -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "kind": comp.kind,
        "labels": list(comp.labels),
        "runs": {label: list(ids) for label, ids in comp.runs.items()},
        "left_out": dict(comp.left_out),
        "verdict": comp.verdict,
        "warnings": list(comp.warnings),
        "notes": list(comp.notes),
        "metrics": [_metric_json(m) for m in comp.metrics],
        "breakdown": [_metric_json(m) for m in comp.breakdown],
        "reimport_modules": {label: [[name, round(ms, 3)] for name, ms in mods]
                             for label, mods in comp.reimport_modules.items()},
        "ranges": [{
            "name": r.name, "values": {label: dict(v) for label, v in r.values.items()},
            "ratio": _r(r.ratio), "avg_ratio": _r(r.avg_ratio), "beyond_noise": r.beyond_noise,
        } for r in comp.ranges],
        "representative": dict(comp.representative),
        "startup": [{"label": w.label, "run_id": w.run_id, "pid": w.pid, "role": w.role,
                     "phases": [[name, round(ms, 3)] for name, ms in w.phases]} for w in comp.startup],
        "run_dirs": dict(comp.run_dirs),
    }


def _metric_json(m: "Metric") -> dict[str, Any]:
    return {
        "name": m.name, "unit": m.unit, "title": m.title, "help": m.help,
        "values": {label: (None if s is None else {"median": _r(s.median, 6), "min": _r(s.min, 6),
                                                     "max": _r(s.max, 6), "n": s.n})
                   for label, s in m.values.items()},
        "ratio": _r(m.ratio), "ratios": {k: _r(v) for k, v in m.ratios.items()},
        "beyond_noise": m.beyond_noise,
    }


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def to_markdown(comp: "Comparison", figures: dict[str, str] | None = None, top: int = 30) -> str:
    labels = comp.labels
    title = " vs ".join(labels) if comp.kind == "start methods" else f"{len(labels)} runs"
    lines = [f"# gpuscope comparison: {title}", "",
             f"_{time.strftime('%Y-%m-%d %H:%M')}; medians over the usable runs of each "
             f"{'start method' if comp.kind == 'start methods' else 'label'}, with min–max in brackets; "
             "“beyond noise”: the min–max ranges over ≥ 2 runs each do not overlap._", "",
             f"**Verdict.** {comp.verdict}", ""]
    if comp.warnings:
        lines += ["**Warnings**", ""] + [f"- {w}" for w in comp.warnings] + [""]
    lines += ["## Runs", ""]
    lines += _table(["label", "runs", "left out"],
                    [[label, ", ".join(ids), ", ".join(f"{r}: {comp.left_out[r]}" for r in ids if r in comp.left_out)
                      or "—"] for label, ids in comp.runs.items()])
    ratio_head = f"{labels[1]} / {labels[0]}"
    lines += ["", "## Metrics", ""]
    lines += _table(["metric", *labels, ratio_head, "beyond noise"],
                    [[m.title, *(fmt_spread(m.values.get(label), m.unit) for label in labels), _ratio(m.ratio),
                      "yes" if m.beyond_noise else "no"] for m in comp.metrics])
    if comp.notes:
        lines += [""] + [f"_{n}_" for n in comp.notes]
    if comp.breakdown:
        lines += ["", "## Where the wall time goes (parts in order, ms)", ""]
        lines += _table(["part", *labels, ratio_head, "beyond noise"],
                        [[m.title, *(fmt_spread(m.values.get(label), m.unit) for label in labels), _ratio(m.ratio),
                          "yes" if m.beyond_noise else "no"] for m in comp.breakdown])
    if comp.ranges:
        lines += ["", f"## Ranges{f' (the {top} with the most time)' if len(comp.ranges) > top else ''}", ""]
        head = ["range"] + [f"{label} count / total / avg" for label in labels] + [ratio_head, "beyond noise"]
        rows = []
        for r in comp.ranges[:top]:
            cells = []
            for label in labels:
                v = r.values[label]
                cells.append(f"{v['count']} / {fmt(v['total_ns'] / 1e6, 'ms')} / "
                             f"{fmt(v['avg_ns'] / 1e6 if v['avg_ns'] is not None else None, 'ms')}")
            rows.append([r.name, *cells, _ratio(r.ratio), "yes" if r.beyond_noise else "no"])
        lines += _table(head, rows)
    if comp.startup:
        lines += ["", "## Start-up of each worker (representative run; ms since the first phase)", ""]
        rows = [[w.label, w.run_id, str(w.pid), w.role, " → ".join(f"{n} {ms:.1f}" for n, ms in w.phases)]
                for w in comp.startup]
        lines += _table(["label", "run", "pid", "role", "phases"], rows)
    for caption, path in (figures or {}).items():
        lines += ["", f"![{caption}]({path})"]
    return "\n".join(lines) + "\n"
