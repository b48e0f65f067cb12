"""Compare runs side by side: the same script under fork, spawn and forkserver, or any runs.

The model (docs/COMPARE.md): runs are grouped under labels (a start method, or a run id); each
metric is a :class:`Spread` over the usable runs of a label (median, min-max), and a difference is
*beyond noise* only when the labels' min-max ranges over >= 2 runs each do not overlap
(:mod:`gpuscope.analysis.stats`). The verdict (:mod:`gpuscope.analysis.verdict`) is built from
those numbers only. Markdown and JSON exports: :mod:`gpuscope.analysis.compare_export`.
"""

from __future__ import annotations

import statistics
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from gpuscope.analysis.run_figures import METRICS, ROLE_METRIC, RunFigures, run_figures
from gpuscope.analysis.stats import MIN_RUNS, Spread, beyond_noise, ratio, separated, spread
from gpuscope.analysis.wall_parts import PARTS
from gpuscope.errors import UserError

if TYPE_CHECKING:
    # a store connection: sqlite3.Connection or its look-alike gpuscope.store.db.StoreConnection
    Connection = Any

__all__ = ["Spread", "Metric", "RangeRow", "WorkerStartup", "Comparison", "compare_runs", "compare_recorded",
           "figures_of"]

# Fields of a run's spec that must agree for a fair comparison (the start method is what differs).
SPEC_FIELDS = (("script", "script"), ("args", "arguments"), ("python", "interpreter"), ("launcher", "launcher"),
               ("nproc", "--nproc"), ("annotate", "--annotate"), ("cwd", "working directory"),
               ("env", "environment"))
OPTIONAL_METRICS = ("hook_ms", "uss_per_worker_bytes", "gpu_mem_per_process_bytes", "cuda_contexts_per_gpu",
                    "nsys_coverage_pct")


@dataclass
class Metric:
    """One figure of a comparison: its spread per label and whether the labels differ beyond the noise."""

    name: str                          # stable (docs/COMPARE.md): wall_s, child_startup_ms, ...
    unit: str                          # s, ms, bytes, count
    values: dict[str, Spread | None]   # label -> spread over its usable runs (None: not measured)
    ratio: float | None                # second label / first label (medians)
    beyond_noise: bool                 # some pair of labels: min-max over >= 2 runs each do not overlap
    title: str
    ratios: dict[str, float | None] = field(default_factory=dict)   # label -> its median / the first's
    lower_is_better: bool = True
    help: str = ""                     # what exactly is measured

    def separated(self, a: str, b: str) -> bool:
        return separated(self.values.get(a), self.values.get(b))

    def median(self, label: str) -> float | None:
        s = self.values.get(label)
        return s.median if s is not None else None


@dataclass
class RangeRow:
    """One range name's count and time per label, and the ratio of the totals."""

    name: str
    values: dict[str, dict[str, Any]]  # label -> {"count", "total_ns", "avg_ns", "min_total_ns", "max_total_ns", "n"}
    ratio: float | None                # total time, second label / first label
    beyond_noise: bool                 # on the total time per run
    avg_ratio: float | None = None     # average time per range, second / first


@dataclass
class WorkerStartup:
    """Start-up phases of one worker of a label's representative run."""

    label: str
    run_id: str
    pid: int
    role: str
    phases: list[tuple[str, float]]    # (phase, ms since the reference = the first phase), in order


@dataclass
class Comparison:
    """Two or more groups of runs compared: figures, ranges, start-up, verdict (``compare --json``)."""

    labels: list[str]
    runs: dict[str, list[str]]              # label -> run ids (all, including the left-out ones)
    left_out: dict[str, str]                # run id -> why it is not in the medians
    metrics: list[Metric]
    ranges: list[RangeRow]
    verdict: str
    warnings: list[str]
    representative: dict[str, str]          # label -> run id whose timeline and start-up are shown
    startup: list[WorkerStartup]
    run_dirs: dict[str, str]
    kind: str = "runs"                      # "start methods" (labels are methods) or "runs" (run ids)
    notes: list[str] = field(default_factory=list)   # facts worth a line (what was sampled, ...)
    breakdown: list[Metric] = field(default_factory=list)   # the wall time's parts (analysis/wall_parts.py), ms
    # label -> the slowest modules the representative run's first worker re-imported with __main__ (ms)
    reimport_modules: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def usable_runs(self, label: str) -> list[str]:
        return [r for r in self.runs.get(label, []) if r not in self.left_out]

    def to_json(self) -> dict[str, Any]:
        from gpuscope.analysis.compare_export import to_json

        return to_json(self)

    def to_markdown(self, figures: dict[str, str] | None = None) -> str:
        """Markdown; ``figures`` maps a caption to an image path to include (the app's charts)."""
        from gpuscope.analysis.compare_export import to_markdown

        return to_markdown(self, figures)

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON data (a remote agent's answer; :meth:`from_dict` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        def spreads(values: dict[str, Any]) -> dict[str, Spread | None]:
            return {k: Spread(**v) if v is not None else None for k, v in values.items()}

        def metric(m: dict[str, Any]) -> Metric:
            return Metric(**dict(m, values=spreads(m.get("values") or {})))

        return cls(**dict(
            d, metrics=[metric(m) for m in d.get("metrics") or ()],
            breakdown=[metric(m) for m in d.get("breakdown") or ()],
            ranges=[RangeRow(**r) for r in d.get("ranges") or ()],
            startup=[WorkerStartup(**dict(w, phases=[tuple(p) for p in w.get("phases") or ()]))
                     for w in d.get("startup") or ()],
            reimport_modules={k: [tuple(m) for m in v] for k, v in (d.get("reimport_modules") or {}).items()}))


# -- loading -----------------------------------------------------------------------------------------
def _rows(run_ids: list[str], conn: "Connection") -> list[Any]:
    from gpuscope.store import runs as store_runs

    rows, seen = [], set()
    for run_id in run_ids:
        row = store_runs.get_run(conn, run_id)
        if row is None:
            raise UserError(f"no run {run_id!r} in the store (see `gpuscope history`)")
        if row.id not in seen:
            seen.add(row.id)
            rows.append(row)
    return rows


@contextmanager
def _connected(conn: "Connection | None") -> "Iterator[Connection]":
    if conn is not None:
        yield conn
        return
    from gpuscope.store import db

    with db.connect() as own:
        yield own


def figures_of(run_ids: list[str], conn: "Connection | None" = None) -> list[RunFigures]:
    """The figures of stored runs (ids or unique prefixes), in the order given."""
    with _connected(conn) as c:
        return [run_figures(row, c) for row in _rows(run_ids, c)]


# -- comparing ---------------------------------------------------------------------------------------
def compare_runs(groups: dict[str, list[str]], conn: "Connection | None" = None,
                 kind: str = "start methods") -> Comparison:
    """Compare runs grouped under labels (label -> run ids, e.g. the repeats of each method)."""
    groups = {label: list(ids) for label, ids in groups.items() if ids}
    if len(groups) < 2:
        raise UserError("nothing to compare: it takes runs under at least two labels (e.g. fork and spawn)")
    with _connected(conn) as c:
        figs = {label: [run_figures(row, c) for row in _rows(ids, c)] for label, ids in groups.items()}
    return build(figs, kind)


def compare_recorded(run_ids: list[str], conn: "Connection | None" = None) -> Comparison:
    """Compare recorded runs. Runs that differ only by start method (each method with its runs)
    are grouped by method; otherwise each run is its own label (its id)."""
    if len(set(run_ids)) < 2:
        raise UserError("compare needs at least two runs (give two or more run ids, see `gpuscope history`)")
    with _connected(conn) as c:
        figs = [run_figures(row, c) for row in _rows(run_ids, c)]
    if len(figs) < 2:
        raise UserError("compare needs at least two different runs (the ids given name the same run)")
    methods = [f.start_method for f in figs]
    same = all(_spec_key(f.spec) == _spec_key(figs[0].spec) for f in figs)
    if same and len(set(methods)) >= 2 and all(f.spec.get("launcher", "python") == "python" for f in figs):
        grouped: dict[str, list[RunFigures]] = {}
        for f in figs:
            grouped.setdefault(f.start_method, []).append(f)
        return build(grouped, "start methods")
    return build({f.run_id: [f] for f in figs}, "runs")


def _spec_key(spec: dict[str, Any]) -> tuple:
    return tuple(repr(spec.get(k)) for k, _ in SPEC_FIELDS)


def build(figs: dict[str, list[RunFigures]], kind: str = "start methods") -> Comparison:
    """The comparison of figures already read (label -> the figures of its runs, in run order)."""
    from gpuscope.analysis.verdict import verdict

    labels = list(figs)
    usable = {label: [f for f in runs if f.usable] for label, runs in figs.items()}
    left_out = {f.run_id: f.why_left_out for runs in figs.values() for f in runs if f.why_left_out is not None}
    metrics = _metrics(labels, usable)
    ranges = _range_rows(labels, usable)
    representative = {label: _representative(usable[label] or figs[label]) for label in labels}
    by_id = {f.run_id: f for runs in figs.values() for f in runs}
    startup = [WorkerStartup(label, representative[label], w.pid, w.role, [(p.name, p.ms) for p in w.phases])
               for label in labels for w in by_id[representative[label]].workers]
    comp = Comparison(
        labels=labels, runs={label: [f.run_id for f in runs] for label, runs in figs.items()},
        left_out=left_out, metrics=metrics, ranges=ranges, verdict="", warnings=_warnings(figs, usable, kind),
        representative=representative, startup=startup,
        run_dirs={f.run_id: f.run_dir for runs in figs.values() for f in runs}, kind=kind,
        notes=_notes(figs), breakdown=_breakdown(labels, usable),
        reimport_modules={label: by_id[representative[label]].reimport_modules for label in labels})
    comp.verdict = verdict(comp)
    return comp


def _representative(runs: list[RunFigures]) -> str:
    """The run whose wall time is the median of its label's (the one whose timeline is shown)."""
    timed = [(wall, f.run_id) for f in runs if (wall := f.values.get("wall_s")) is not None]
    if not timed:
        return runs[0].run_id
    return statistics.median_low(timed)[1]


def _metric(name: str, unit: str, title: str, labels: list[str], values: dict[str, list[float | None]],
            lower_is_better: bool = True, help: str = "") -> Metric:
    spreads = {label: spread(values.get(label, [])) for label in labels}
    first = spreads[labels[0]]
    ratios = {label: ratio(first.median if first else None, s.median if s else None)
              for label, s in spreads.items() if label != labels[0]}
    return Metric(name=name, unit=unit, values=spreads, ratio=ratios.get(labels[1]),
                  beyond_noise=beyond_noise([spreads[label] for label in labels]), title=title,
                  ratios=ratios, lower_is_better=lower_is_better, help=help)


def _metrics(labels: list[str], usable: dict[str, list[RunFigures]]) -> list[Metric]:
    out = []
    for d in METRICS:
        values = {label: [f.values.get(d.name) for f in usable[label]] for label in labels}
        m = _metric(d.name, d.unit, d.title, labels, values, d.lower_is_better, d.help)
        if d.name in OPTIONAL_METRICS and all(s is None for s in m.values.values()):
            continue   # not measured in any run (no GPU, USS not sampled): no empty row
        out.append(m)
        if d.name == "processes":
            roles = sorted({r for runs in usable.values() for f in runs for r in f.roles})
            for role in roles:
                values = {label: [float(f.roles.get(role, 0)) if f.has_events else None for f in usable[label]]
                          for label in labels}
                out.append(_metric(ROLE_METRIC.format(role), "count", f"processes: {role}", labels, values))
    return out


def _breakdown(labels: list[str], usable: dict[str, list[RunFigures]]) -> list[Metric]:
    """One metric per part of the wall time, over the runs whose event logs cut it into parts."""
    out = []
    for part in PARTS:
        values = {label: [f.parts.get(part.name) for f in usable[label]] for label in labels}
        if any(v is not None for vs in values.values() for v in vs):
            out.append(_metric(part.name, "ms", part.title, labels, values, help=part.phrase))
    return out


def _range_rows(labels: list[str], usable: dict[str, list[RunFigures]]) -> list[RangeRow]:
    names = sorted({n for runs in usable.values() for f in runs for n in f.ranges})
    rows = []
    for name in names:
        values: dict[str, dict[str, Any]] = {}
        totals: dict[str, Spread | None] = {}
        for label in labels:
            runs = [f for f in usable[label] if f.has_events]
            per_run = [f.ranges.get(name, (0, 0)) for f in runs]
            total = spread([t for _, t in per_run])
            totals[label] = total
            avgs = [t / c for c, t in per_run if c]
            values[label] = {
                "count": int(statistics.median([c for c, _ in per_run])) if per_run else 0,
                "total_ns": int(total.median) if total else 0,
                "avg_ns": float(statistics.median(avgs)) if avgs else None,
                "min_total_ns": int(total.min) if total else None,
                "max_total_ns": int(total.max) if total else None,
                "n": len(per_run),
            }
        a, b = values[labels[0]], values[labels[1]]
        rows.append(RangeRow(name=name, values=values, ratio=ratio(a["total_ns"] or None, b["total_ns"]),
                             beyond_noise=beyond_noise([totals[label] for label in labels]),
                             avg_ratio=ratio(a["avg_ns"], b["avg_ns"])))
    rows.sort(key=lambda r: -max(v["total_ns"] for v in r.values.values()))
    return rows


def _warnings(figs: dict[str, list[RunFigures]], usable: dict[str, list[RunFigures]], kind: str) -> list[str]:
    out = []
    every = [f for runs in figs.values() for f in runs]
    for key, what in SPEC_FIELDS:
        seen = {repr(f.spec.get(key)): f for f in every}
        if len(seen) > 1:
            shown = ", ".join(f"{_short(f.spec.get(key))} ({f.run_id})" for f in list(seen.values())[:3])
            out.append(f"the runs differ in their {what}: {shown}; compared anyway")
    if kind == "runs":
        methods = {f.start_method for f in every}
        if len(methods) > 1:
            out.append("start methods differ: " + ", ".join(f"{f.run_id} {f.start_method}" for f in every))
    for label, runs in figs.items():
        for f in runs:
            if not f.usable:
                out.append(f"run {f.run_id} ({label}) {f.why_left_out}: shown, left out of the medians")
            elif not f.has_events:
                out.append(f"run {f.run_id} ({label}) has no event logs: its start-up, tasks and ranges are unknown")
        if not usable[label]:
            out.append(f"{label}: no run that ended normally; nothing of it is in the figures")
        elif len(usable[label]) < MIN_RUNS:
            out.append(f"{label}: one run only; one run cannot separate a difference from noise")
    return out


def _notes(figs: dict[str, list[RunFigures]]) -> list[str]:
    out = []
    sampled = sorted({s for runs in figs.values() for f in runs for s in f.sampled})
    if sampled:
        out.append(f"{' and '.join(sampled)} of some processes sampled at the telemetry interval (not measured "
                   "by the process itself); the rest exact")
    for label, runs in figs.items():
        for what in ("CPU", "RSS"):
            worst = max((f.unmeasured.get(what, 0) for f in runs), default=0)
            if worst:
                out.append(f"{label}: {what} unknown for up to {worst} process(es) of a run (they ended before "
                           f"the sampler saw them and wrote no exit record); the sums leave them out")
    return out


def _short(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        text = " ".join(str(v) for v in value) or "(none)"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
    else:
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
