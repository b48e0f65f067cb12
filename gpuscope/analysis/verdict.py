"""The verdict of a comparison: one or two sentences, from the numbers only.

Rules (docs/COMPARE.md): a difference is stated only when it is beyond noise (the labels'
min-max ranges over >= 2 runs each do not overlap); otherwise the verdict says "no difference
beyond noise". With one run of a label it says that one run cannot separate a difference from
noise. Explanations (start-up, task speed) are stated with their own beyond-noise status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.analysis.stats import MIN_RUNS, Spread
from gpuscope.analysis.wall_parts import FORK_REIMPORT_PHRASE

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


# A part of the wall-time difference is named when it holds at least this share of it (at most
# MAX_PARTS named); the rest are summed as "the other parts".
PART_SHARE = 0.05
MAX_PARTS = 4
REIMPORT_MODULES = 3   # modules named beside the re-import


def _reasons(comp: "Comparison", fast: str, slow: str) -> list[str]:
    """Where a beyond-noise wall-time difference goes: its parts, largest first, each with its share
    of the difference and its own noise status, and what the parts do not account for."""
    wall = comp.metric("wall_s")
    assert wall is not None
    w_fast, w_slow = wall.median(fast), wall.median(slow)
    assert w_fast is not None and w_slow is not None
    diff = (w_slow - w_fast) * 1000
    parts = [(m, b - a) for m in comp.breakdown
             if (a := m.median(fast)) is not None and (b := m.median(slow)) is not None]
    if not parts or diff <= 0:
        return _other_differences(comp, fast, slow)
    parts.sort(key=lambda md: -abs(md[1]))
    named = [md for md in parts if abs(md[1]) >= PART_SHARE * diff][:MAX_PARTS] or parts[:1]
    out = [_part_clause(comp, m, d, diff, fast, slow) for m, d in named]
    rest = sum(d for m, d in parts if all(m is not n for n, _ in named))
    if round(rest, 1):
        out.append(f"the other parts {_signed(rest)} ({_share(rest, diff)})")
    missing = diff - sum(d for _, d in parts)
    out.append(f"not accounted for {_signed(missing)} ({_share(missing, diff)}; the parts' medians come from "
               "different repeats)" if round(missing, 1) else "nothing left unaccounted for")
    return [f"+{fmt(diff, 'ms')} of wall time ({fmt(w_fast, 's')} → {fmt(w_slow, 's')}); largest first: "
            + out[0], *out[1:]]


def _part_clause(comp: "Comparison", m: "Metric", d: float, diff: float, fast: str, slow: str) -> str:
    a, b = m.median(fast), m.median(slow)
    phrase = m.help or m.title
    if m.name == "main_reimport" and _method(comp, slow) == "fork":
        phrase = FORK_REIMPORT_PHRASE
    elif m.name == "process_start" and _method(comp, slow) == "forkserver":
        phrase += " and the fork server's own start (the first start() waits for it)"
    text = (f"{phrase} {_signed(d)} ({_share(d, diff)}: {fmt(b, 'ms')} under {slow}, {fmt(a, 'ms')} "
            f"under {fast}")
    if m.name == "main_reimport" and comp.reimport_modules.get(slow):
        text += "; its slowest imports: " + ", ".join(
            f"{name} {fmt(ms, 'ms')}" for name, ms in comp.reimport_modules[slow][:REIMPORT_MODULES])
    if m.name == "tasks":
        text += _task_detail(comp, fast, slow)
    elif not m.separated(fast, slow):
        text += ", within noise"
    return text + ")"


def _task_detail(comp: "Comparison", fast: str, slow: str) -> str:
    """What the tasks themselves do: per-task time, with its own noise status."""
    tasks = comp.metric("task_ms_median")
    a = tasks.median(fast) if tasks is not None else None
    b = tasks.median(slow) if tasks is not None else None
    if tasks is None or not a or b is None:
        return ""
    if tasks.separated(fast, slow):
        return f"; each task runs {_slower_text(b / a)}, {fmt(b, 'ms')} vs {fmt(a, 'ms')}"
    return f"; per task no difference beyond noise, {b / a:.2f}×"


def _method(comp: "Comparison", label: str) -> str | None:
    return label.split()[0] if comp.kind == "start methods" else None


def _signed(ms: float) -> str:
    return ("+" if ms >= 0 else "−") + fmt(abs(ms), "ms")


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %".replace("-", "−")


def _other_differences(comp: "Comparison", a: str, b: str, limit: int = 3) -> list[str]:
    """The other metrics whose difference between a and b is beyond noise (a few, named)."""
    chosen = [m for m in comp.metrics if m.name != "wall_s" and m.separated(a, b)]
    names = [m.name for m in chosen[:limit]]
    if "child_startup_ms" in names and "main_reimport_ms" not in names:   # the start-up never alone
        names += [m.name for m in chosen if m.name == "main_reimport_ms"]
    return [f"{_lower(m)} {fmt(m.median(b), m.unit)} under {b} vs {fmt(m.median(a), m.unit)} under {a}"
            for m in chosen if m.name in names]


def _lower(m: "Metric") -> str:
    return m.title.split(" (")[0].lower()
