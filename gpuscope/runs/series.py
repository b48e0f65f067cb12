"""A start-method series: the same script, arguments, interpreter and options run under two or
three start methods, alternated (A B A B …) so that the machine's noise falls on each of them.

Used by ``gpuscope compare --start-methods`` (blocking ``run``) and by the app (``run`` on a worker
thread, ``stop`` from the GUI thread, ``current`` shown live). Each run is an ordinary ``Run`` with
the usual recorders plus :class:`gpuscope.runs.recorders.uss_sampling.UssRecorder` (USS per
process: what fork's copy-on-write sharing saves). ``gpuscope.analysis.comparison.compare_runs``
turns the result into a comparison.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from gpuscope.errors import UserError
from gpuscope.runs.supervisor import Run, RunResult
from gpuscope.spec import RunSpec

METHODS = ("fork", "spawn", "forkserver")
DEFAULT_METHODS = ("fork", "spawn")
DEFAULT_REPEAT = 3
MAX_REPEAT = 50

# (i 1-based, n, method, repeat 1-based), called before each run starts
SeriesProgress = Callable[[int, int, str, int], None]


def parse_methods(text: str | list[str] | tuple[str, ...]) -> list[str]:
    """``fork,spawn`` (or a list) checked: two or three start methods; one-line errors."""
    items = [m.strip() for m in (text.split(",") if isinstance(text, str) else text) if m.strip()]
    for m in items:
        if m not in METHODS:
            raise UserError(f"unknown start method {m!r} in --start-methods; choose from {', '.join(METHODS)}")
    if len(items) < 2:
        raise UserError("--start-methods needs at least two methods to compare, e.g. fork,spawn")
    if len(items) > 3:
        raise UserError("--start-methods takes two or three methods (fork, spawn, forkserver)")
    return items


def labels_for(methods: list[str]) -> list[str]:
    """One label per method; a method given twice (an A/A series, to see the noise) gets "fork 2"."""
    out: list[str] = []
    for m in methods:
        label, k = m, 2
        while label in out:
            label, k = f"{m} {k}", k + 1
        out.append(label)
    return out


class StartMethodSeries:
    """Runs ``spec`` under each method, ``repeat`` times, alternated; ``stop()`` ends it all.

    ``run_kwargs`` go to each ``Run`` (``output``, ``progress``, ``store_path``, ...); a recorder
    serves one run only, so ``run_kwargs["recorders"]`` may be a callable that returns new ones.
    """

    def __init__(self, spec: RunSpec, methods: list[str], repeat: int = DEFAULT_REPEAT,
                 progress: SeriesProgress | None = None, run_kwargs: dict[str, Any] | None = None,
                 sample_uss: bool = True):
        self.methods = parse_methods(list(methods))
        if not 1 <= int(repeat) <= MAX_REPEAT:
            raise UserError(f"--repeat must be between 1 and {MAX_REPEAT}, not {repeat}")
        if spec.launcher != "python":
            raise UserError("comparing start methods needs the python launcher (torchrun starts its own processes)")
        self.spec = spec.validated()
        self.repeat = int(repeat)
        self.labels = labels_for(self.methods)
        self.progress = progress or (lambda *_: None)
        self.run_kwargs = dict(run_kwargs or {})
        self.sample_uss = sample_uss
        self.current: Run | None = None
        self.current_label: str | None = None
        self.runs: dict[str, list[str]] = {label: [] for label in self.labels}
        self.results: list[RunResult] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def plan(self) -> list[tuple[str, str, int]]:
        """(label, method, repeat 1-based) in the order they run: A B A B … (A B C A B C …)."""
        return [(label, method, r) for r in range(1, self.repeat + 1)
                for label, method in zip(self.labels, self.methods)]

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run(self) -> dict[str, list[str]]:
        """Run the series (blocking); label -> run ids, in the order they ran."""
        plan = self.plan()
        for i, (label, method, rep) in enumerate(plan, 1):
            if self._stop.is_set():
                break
            self.progress(i, len(plan), method, rep)
            kwargs = dict(self.run_kwargs)
            extra = kwargs.pop("recorders", ())
            recorders = list(extra() if callable(extra) else extra)
            if self.sample_uss:
                from gpuscope.runs.recorders.uss_sampling import UssRecorder

                recorders.append(UssRecorder())
            with self._lock:
                if self._stop.is_set():
                    break
                run = Run(self.spec._replace(start_method=method), recorders=recorders, **kwargs)
                self.current, self.current_label = run, label
            try:
                run.start()
                result = run.wait()
            finally:
                with self._lock:
                    self.current = self.current_label = None
            self.runs[label].append(run.run_id)
            self.results.append(result)
        return {label: list(ids) for label, ids in self.runs.items()}

    def stop(self) -> None:
        """End the series: the run in progress is stopped (a second call kills it at once), no
        further run starts. Safe from any thread."""
        with self._lock:
            self._stop.set()
            run = self.current
        if run is not None:
            run.stop()
