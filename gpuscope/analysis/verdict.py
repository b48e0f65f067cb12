"""The verdict of a comparison: one or two sentences, from the numbers only.

Rules (docs/COMPARE.md): a difference is stated only when it is beyond noise (the labels'
min-max ranges over >= 2 runs each do not overlap); otherwise the verdict says "no difference
beyond noise". With one run of a label it says that one run cannot separate a difference from
noise. Explanations (start-up, task speed) are stated with their own beyond-noise status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.analysis.stats import MIN_RUNS, Spread

if TYPE_CHECKING:
    from gpuscope.analysis.comparison import Comparison, Metric


def fmt(value: float | None, unit: str) -> str:
    """A value in its unit, as people read it: 1.42 s, 203 ms, 512 MiB, 3."""
    if value is None:
        return "—"
    if unit == "s":
        return f"{value:.3g} s" if value < 100 else f"{value:.0f} s"
    if unit == "ms":
        if value >= 10000:
            return f"{value / 1000:.3g} s"
        return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"
    if unit == "bytes":
        for div, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= div:
                v = value / div
                return f"{v:.3g} {name}" if v < 100 else f"{v:.0f} {name}"
        return f"{value:.0f} B"
    if unit == "count":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return f"{value:.3g} {unit}"


def fmt_spread(s: Spread | None, unit: str) -> str:
    if s is None:
        return "—"
    if s.n < 2 or s.min == s.max:
        return fmt(s.median, unit)
    return f"{fmt(s.median, unit)} ({fmt(s.min, unit)}–{fmt(s.max, unit)})"


def _slower_text(r: float) -> str:
    return f"{r:.2f}× slower" if r >= 1 else f"{1 / r:.2f}× faster"


def verdict(comp: "Comparison") -> str:
    wall = comp.metric("wall_s")
    assert wall is not None
    measured = [label for label in comp.labels if wall.values.get(label) is not None]
    missing = [label for label in comp.labels if label not in measured]
    if len(measured) < 2:
        if not missing:
            return "Nothing to compare: fewer than two labels have a run that ended normally."
        who = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
        return (f"Nothing to compare: {who} {'has' if len(missing) == 1 else 'have'} no run that ended "
                "normally (see the warnings).")
    few = [label for label in measured if wall.values[label].n < MIN_RUNS]   # type: ignore[union-attr]
    if few:
        shown = ", ".join(f"{label} {fmt_spread(wall.values[label], 's')}" for label in measured)
        what = "One run each" if len(few) == len(measured) else f"One run of {', '.join(few)}"
        return (f"{what} cannot separate a difference from noise (wall time: {shown}); repeat the runs "
                f"(e.g. --repeat 3) for a verdict.")
    order = sorted(measured, key=lambda label: wall.values[label].median)   # type: ignore[union-attr]
    fastest = order[0]
    sentences = []
    for other in order[1:]:
        pair = len(measured) == 2
        if wall.separated(fastest, other):
            r = wall.values[other].median / wall.values[fastest].median   # type: ignore[union-attr]
            head = f"{other} is {r:.2f}× slower here" if pair else f"{other} is {r:.2f}× slower than {fastest}"
            reasons = _reasons(comp, fastest, other)
            sentences.append(head + (": " + "; ".join(reasons) if reasons else "") + ".")
        else:
            ranges = ", ".join(f"{label} {fmt_spread(wall.values[label], 's')}" for label in (fastest, other))
            sentences.append(f"No difference beyond noise in wall time between {fastest} and {other} ({ranges})."
                             if not pair else f"No difference beyond noise in wall time ({ranges}).")
            extra = _other_differences(comp, fastest, other)
            if extra:
                sentences.append("Beyond noise: " + "; ".join(extra) + ".")
    if missing:
        sentences.append(f"{', '.join(missing)}: no run ended normally, not compared.")
    return " ".join(_capital(s) for s in sentences)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _reasons(comp: "Comparison", fast: str, slow: str) -> list[str]:
    """What explains a beyond-noise wall-time difference, each with its own noise status."""
    out = []
    start = comp.metric("child_startup_ms")
    wall = comp.metric("wall_s")
    assert wall is not None
    if start is not None and start.separated(fast, slow):
        a, b = start.median(fast), start.median(slow)
        w = wall.median(slow)
        if a is not None and b is not None and b > a and w:
            out.append(f"each worker needs {fmt(b, 'ms')} to start ({fast}: {fmt(a, 'ms')}), which is "
                       f"{100 * b / (w * 1000):.0f} % of this {fmt(w, 's')} run")
    tasks = comp.metric("task_ms_median")
    if tasks is not None and tasks.median(fast) and tasks.median(slow) is not None:
        r = tasks.median(slow) / tasks.median(fast)   # type: ignore[operator]
        if tasks.separated(fast, slow):
            out.append(f"the tasks themselves run {_slower_text(r)} ({fmt(tasks.median(slow), 'ms')} vs "
                       f"{fmt(tasks.median(fast), 'ms')} per task)")
        else:
            out.append(f"the tasks themselves show no difference beyond noise ({r:.2f}×)")
    if not out:
        out = _other_differences(comp, fast, slow)
    return out


def _other_differences(comp: "Comparison", a: str, b: str, limit: int = 3) -> list[str]:
    """The other metrics whose difference between a and b is beyond noise (a few, named)."""
    out = []
    for m in comp.metrics:
        if m.name == "wall_s" or not m.separated(a, b):
            continue
        out.append(f"{_lower(m)} {fmt(m.median(b), m.unit)} under {b} vs {fmt(m.median(a), m.unit)} under {a}")
        if len(out) == limit:
            break
    return out


def _lower(m: "Metric") -> str:
    return m.title.split(" (")[0].lower()
