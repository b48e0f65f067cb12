"""What a quiet run costs the GUI thread, around its start, while it runs and at its end (issue 16.1).

A run without any output must not freeze the window either: the stalls left after the console's
fix were the window's own redraws. These tests watch how the real window paints during a real
run, which is what made those stalls, rather than timing it (the machine is shared and loaded):

* one turn of the event loop (between two beats of a 2 ms timer) repaints at most one of the
  live plots: the tick's redraws are staged one per turn, so a stall is one plot's repaint, never
  the sum of all four, the process table and the console;
* while the run runs, the tab widget of the Run tab is never repainted: its views paint their own
  background and the tab widgets lay themselves out only when their size hints change (a label's
  new text, the run clock's, used to make the whole Run tab repaint and lay out again);
* the processes' roles are read from their event logs on a pool thread (a pool worker's log holds
  a line per task; up to 1 MB of each was read again every second on the GUI thread);
* and, a bound about freezing with a wide margin, the longest stall from the Run click to the report.

The old window fails the first three on every run: the plots were repainted together on every
refresh, the Run tab was repainted whole at each second of the clock, the roles were read on the
GUI thread.
"""

from __future__ import annotations

import threading
import time

import pytest
from apphelpers import fill, make_window, wait_report
from PySide6.QtCore import QEvent, QObject, Qt, QTimer

from gpuscope.views import procroles

pytestmark = pytest.mark.gui

# about freezing, far above a loaded machine's pauses (the stall figures belong in benchmarks)
FREEZE_BOUND_S = 5.0


class PaintLog(QObject):
    """Notes which watched widgets painted in which turn of the event loop (``turn``: the test's
    2 ms timer counts its beats; paints with no beat between them made one stall together)."""

    def __init__(self, window, watched: dict[str, object]) -> None:
        super().__init__()
        self.window = window
        self.turn = 0
        self.painted: list[tuple[float, int, str]] = []     # (time, turn, name)
        self.names = {id(widget): name for name, widget in watched.items()}
        for widget in watched.values():
            widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Type.Paint and id(obj) in self.names:
            self.painted.append((time.monotonic(), self.turn, self.names[id(obj)]))
        return False

    def between(self, since: float, until: float) -> list[tuple[float, int, str]]:
        return [p for p in self.painted if since <= p[0] <= until]


def test_a_quiet_run_paints_one_plot_at_a_time_and_not_the_whole_run_tab(qtbot, monkeypatch):
    role_reads: list[str] = []          # the threads the processes' roles were read on
    real_refresh = procroles.RoleReader._refresh

    def lookup(self):
        role_reads.append(threading.current_thread().name)
        return real_refresh(self)

    monkeypatch.setattr(procroles.RoleReader, "_refresh", lookup)
    w = make_window(qtbot)
    qtbot.wait(300)                     # the window's first paint is not the run's
    fill(w, "quiet_sleep.py", "2.6", "default")
    plots = {f"plot {name}": p.plot.viewport() for name, p in w.live.plots.items()}
    log = PaintLog(w, {**plots, "Run tab": w.tabs})
    beats: list[tuple[float, float]] = []
    last = [time.monotonic()]

    def beat() -> None:
        now = time.monotonic()
        beats.append((now, now - last[0]))
        last[0] = now
        log.turn += 1

    timer = QTimer(interval=2)
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.timeout.connect(beat)
    started: list[float] = []
    w.controller.sigStarted.connect(lambda run: started.append(time.monotonic()))
    timer.start()
    click = time.monotonic()
    with qtbot.waitSignal(w.controller.sigEnded, timeout=120_000) as ended:
        w.panel.run_button.click()
    end = time.monotonic()
    wait_report(qtbot, w, timeout=60_000)
    qtbot.wait(300)
    timer.stop()
    assert ended.args[0].status == "exited"
    assert started, "the run never started"

    # the plots were redrawn while the run ran (samples came in; past its start, and before its
    # end, whose layout changes may resize and so repaint all of them once) ...
    during = log.between(started[0] + 0.3, end)
    plot_paints = [p for p in during if p[2].startswith("plot ")]
    assert {"plot cpu", "plot rss"} <= {p[2] for p in plot_paints}, plot_paints
    # ... and a turn of the event loop repainted one of them (the old window: both in every turn
    # that painted a plot). A GUI thread kept from running for longer than the steps' spacing (a
    # loaded machine) may see two steps' paints in one turn now and then: a quarter is the bound.
    per_turn: dict[int, set[str]] = {}
    for _t, n, name in plot_paints:
        per_turn.setdefault(n, set()).add(name)
    together = {n: names for n, names in per_turn.items() if len(names) > 1}
    assert len(together) <= len(per_turn) / 4, \
        f"{len(together)} of {len(per_turn)} turns of the event loop repainted several plots: {together}"

    # past its first half second (the Run/Stop buttons change as it starts), the run repaints
    # nothing of the Run tab's own frame: the run clock's seconds used to repaint it whole
    steady = [p for p in log.between(started[0] + 0.5, end) if p[2] == "Run tab"]
    assert not steady, f"the Run tab was repainted {len(steady)} times while the run ran"

    # the roles were read while it ran, never on the GUI thread
    gui = threading.main_thread().name
    assert role_reads and gui not in role_reads, role_reads

    # and the GUI thread never froze, from the click to the report shown
    longest = max(gap for t, gap in beats if t > click)
    assert longest < FREEZE_BOUND_S, f"the GUI thread stalled {longest:.2f} s"
