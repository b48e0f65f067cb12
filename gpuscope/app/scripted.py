"""Scripted mode: ``gpuscope gui --run SCRIPT … --screenshot OUT.png --exit-when-done``.

Fills the launch panel from the command line, presses Run, waits for the end of the run and for
its report, shows the chosen tab, saves a picture of the window and quits with the run's exit
status (0 when it exited cleanly, 1 otherwise, 2 when the options were refused).

Comparisons: ``--compare RUN RUN …`` opens the Compare tab on recorded runs; ``--run SCRIPT
--compare-methods fork,spawn --repeat N`` presses "Compare start methods" instead of Run. Both
wait until the comparison is shown, timelines included (exit 0; 1 when it failed or a run of the
series was left out of the medians).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from gpuscope.errors import UserError


def parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError(f"--size takes WIDTHxHEIGHT (e.g. 1280x800), not {text!r}") from None
    return w, h


@dataclass
class ScriptParts:
    """What a scripted run drives: the launch panel, the run and compare presenters, History, the
    report loader, and the window's picture of a named tab (``app/main.py`` hands them over)."""

    panel: Any          # the launch panel: filled from the command line, its Run / Compare pressed
    controller: Any     # the run controller: sigStarted, sigEnded, sigFailed
    compare: Any        # the compare session: sigShown, controller, compare_ids()
    history: Any        # sigLoaded, refresh()
    reports: Any        # the report loader: sigLoaded, sigFailed, load()
    picture: Callable[[str], Any]     # a tab's name -> a QPixmap of the window showing it
    close: Callable[[], None]


class Scripted(QObject):
    """Drives one window's parts through a scripted run; ``exit_code`` is what ``gpuscope gui``
    returns."""

    def __init__(self, parts: ScriptParts, args: argparse.Namespace) -> None:
        super().__init__()
        self.parts, self.args = parts, args
        self.exit_code = 0
        self.shot_taken = False
        self.ended = False
        compare, methods = getattr(args, "compare", None), getattr(args, "compare_methods", None)
        if getattr(args, "screenshot_tab", None) is None:
            args.screenshot_tab = "compare" if compare or methods else "live"
        self.refused = None
        if methods and not args.run:
            self.refused = "--compare-methods needs --run SCRIPT (the script to run under each method)"
        elif compare and args.run:
            self.refused = "--compare compares recorded runs; to run a script under several methods use " \
                           "--run SCRIPT --compare-methods fork,spawn"
        elif methods and getattr(args, "repeat", 3) < 1:
            self.refused = "--repeat takes a count of 1 or more"
        if args.run:
            self._fill(parts.panel)
        if methods:
            for m, box in parts.panel.compare_methods.items():
                box.setChecked(m in methods)
            parts.panel.repeat.setValue(args.repeat)

    def _fill(self, panel: Any) -> None:
        a = self.args
        panel.set_script(str(Path(a.run).expanduser().resolve()) if Path(a.run).exists() else a.run)
        panel.args.setText(a.args)
        panel.cwd.setText(a.cwd or "")
        panel.python.setText(a.python or "")
        if a.start_method:
            panel.method.setCurrentIndex(panel.method.findData(a.start_method))
        if a.launcher:
            panel.launcher.setCurrentText(a.launcher)
        if a.nproc:
            panel.nproc.setValue(a.nproc)
        panel.annotate.setText(", ".join(a.annotate))
        panel.nsys.setChecked(bool(a.nsys))

    # -- the sequence ---------------------------------------------------------------------------
    def begin(self) -> None:
        w, a = self.parts, self.args
        if self.refused:
            print(f"gpuscope: {self.refused}", file=sys.stderr, flush=True)
            self.exit_code = 2
            self.ended = True
            QTimer.singleShot(0, self._quit)
            return
        if getattr(a, "compare", None) or getattr(a, "compare_methods", None):
            self._begin_compare()
        elif a.open:
            w.reports.sigLoaded.connect(lambda _r: self._finish())
            w.reports.sigFailed.connect(lambda _t: self._finish(code=1))
            w.reports.load(a.open, switch=True)
        elif a.run:
            w.panel.sigError.connect(lambda _t: self._finish(code=2))
            w.controller.sigFailed.connect(lambda _t: self._finish(code=1))
            w.controller.sigEnded.connect(self._run_ended)
            if a.screenshot_delay is not None:
                w.controller.sigStarted.connect(
                    lambda _r: QTimer.singleShot(int(a.screenshot_delay * 1000), self._shoot))
            if a.screenshot and a.screenshot_tab == "launch":
                QTimer.singleShot(200, self._shoot)
                QTimer.singleShot(400, w.panel._on_run)
            else:
                QTimer.singleShot(100, w.panel._on_run)
        else:
            QTimer.singleShot(300, self._finish)

    def _begin_compare(self) -> None:
        w, a = self.parts, self.args
        w.compare.sigShown.connect(self._compared)
        w.compare.controller.sigFailed.connect(lambda _t: self._finish(code=1))
        if a.compare:
            QTimer.singleShot(100, lambda: w.compare.compare_ids(list(a.compare)))
            return
        w.panel.sigError.connect(lambda _t: self._finish(code=2))
        if a.screenshot_delay is not None:     # a picture S seconds into the series' first run
            w.compare.controller.sigRunStarted.connect(
                lambda *_r: QTimer.singleShot(int(a.screenshot_delay * 1000), self._shoot))
        if a.screenshot and a.screenshot_tab == "launch":
            QTimer.singleShot(200, self._shoot)
            QTimer.singleShot(400, w.panel._on_compare)
        else:
            QTimer.singleShot(100, w.panel._on_compare)

    def _compared(self, comparison: Any) -> None:
        self._finish(code=1 if comparison.left_out else 0)

    def _run_ended(self, result: Any) -> None:
        self.exit_code = 0 if result.status.ok else 1
        self.parts.reports.sigLoaded.connect(lambda _r: self._finish())
        self.parts.reports.sigFailed.connect(lambda _t: self._finish())

    def _finish(self, code: int | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        if code is not None:
            self.exit_code = code
        if self.args.screenshot and not self.shot_taken and code != 2:
            if self.args.screenshot_tab == "history":   # the table fills from a worker: wait for it
                self.parts.history.sigLoaded.connect(lambda _n: self._shoot_and_quit())
                self.parts.history.refresh()
                return
            self._shoot()
        self._quit_if_done()

    def _shoot_and_quit(self) -> None:
        self._shoot()
        self._quit_if_done()

    def _quit_if_done(self) -> None:
        if self.args.exit_when_done:
            QTimer.singleShot(0, self._quit)

    def _quit(self) -> None:
        self.parts.close()
        app = QApplication.instance()
        if app is not None:
            app.quit()

    # -- the picture ----------------------------------------------------------------------------
    def _shoot(self) -> None:
        if not self.args.screenshot or self.shot_taken:
            return
        path = Path(self.args.screenshot).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self.parts.picture(self.args.screenshot_tab).save(str(path)):
            print(f"gpuscope: cannot write the screenshot {path}", file=sys.stderr, flush=True)
            self.exit_code = 1
        else:
            print(f"gpuscope: screenshot saved to {path}", file=sys.stderr, flush=True)
        self.shot_taken = True
