"""Make the app's acceptance screenshots in a real (X11) window, in one command.

    .venv/bin/python scripts/screenshots.py            # -> docs/screenshots/{run,report,history}-{1280x800,800x500}.png

It runs three small real pool runs (demo_pool.py under fork, forkserver and spawn) in a fresh,
temporary gpuscope home and settings file, so the pictures do not depend on (nor touch) your own
runs and settings, and takes each picture at both sizes:

- ``run-*.png``: the Run tab while the spawn pool runs (launch panel, live plots, process tree);
- ``report-*.png``: the Report tab with that run's report (timeline and summaries);
- ``history-*.png``: the History tab with the three runs;
- ``help-shortcuts.png``: Help → Keyboard shortcuts;
- ``compare-startup-hover.png``: a fork vs spawn series' start-up chart, a spawn worker's
  re-import of ``__main__`` hovered (the tooltip drawn in);
- ``history-series.png``: History with that series expanded into its runs;
- ``torch-ops-report.png``, ``torch-ops-highlight.png``: the report of a 2-rank gloo DDP run with
  ``--torch-profile`` (both ranks' torch ops under their NVTX steps, the Torch ops tab), then
  aten::addmm's row highlighted on the timeline;
- ``report-gpu-lanes.png``: the Report tab on a synthetic nsys export (``tests/gpu/synthetic_export.py``)
  where two processes take turns on GPU 0 and a third has GPU 1: the per-GPU lanes say whose work
  was on each GPU;
- ``attach-picker.png``, ``attach-live.png``, ``attach-stacks.png``, ``attach-profile.png``: File →
  Attach to a running job… on a spawn pool started outside gpuscope: the picker, the Attached tab
  following it, its stacks, and a 5 s profile (top functions per role, flame graph).

Without ``DISPLAY`` it starts itself again under ``xvfb-run`` (Xvfb, the xcb platform: a real X
window, not Qt's offscreen renderer); ``--offscreen`` uses Qt's offscreen platform instead. The
pictures are read back from the X server (``QScreen.grabWindow``), as a user would see them.
About 30 s on a quiet machine; it stops with one line if a step takes over ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "tests" / "app" / "scripts" / "demo_pool.py"
TORCH_DDP = ROOT / "tests" / "views" / "scripts" / "ddp_nvtx_steps.py"   # a gloo DDP loop with NVTX steps
SIZES = ((1280, 800), (800, 500))
REEXEC = "GPUSCOPE_SCREENSHOTS_XVFB"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="folder for the pictures")
    p.add_argument("--offscreen", action="store_true", help="Qt's offscreen platform instead of an X window")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds any one step may take")
    return p.parse_args(argv)


def reexec_under_xvfb(argv: list[str]) -> None:
    """No display: run this script again under xvfb-run, on the xcb platform."""
    xvfb = shutil.which("xvfb-run")
    if xvfb is None:
        sys.exit("screenshots: no DISPLAY and no xvfb-run (install xvfb, or pass --offscreen)")
    env = dict(os.environ, QT_QPA_PLATFORM="xcb", **{REEXEC: "1"})
    os.execve(xvfb, [xvfb, "-a", "-s", "-screen 0 1920x1080x24", sys.executable, __file__, *argv], env)


class Shooter:
    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        from gpuscope.app.main import make_app   # the app's own QApplication set-up (name, icon)

        self.args = args
        self.home = home
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.app = make_app()
        from gpuscope.app.qt_main_window import MainWindow
        from gpuscope.app.settings import open_settings

        self.w = MainWindow(open_settings(str(home / "settings.ini")))
        self.w.show_dialogs = False
        self.w.sigErrorShown.connect(lambda text: print(f"screenshots: the app said: {text}", file=sys.stderr))
        self.w.move(0, 0)
        self.w.resize(*SIZES[0])
        self.w.show()
        self.saved: list[Path] = []

    # -- waiting --------------------------------------------------------------------------------
    def wait(self, cond, what: str, timeout: float | None = None) -> None:
        from PySide6.QtCore import QEventLoop

        end = time.monotonic() + (timeout or self.args.timeout)
        while not cond():
            if time.monotonic() > end:
                raise SystemExit(f"screenshots: gave up waiting for {what}")
            self.app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
            time.sleep(0.02)

    def settle(self, seconds: float = 0.3) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.02)

    # -- runs -----------------------------------------------------------------------------------
    def start(self, epochs: int, method: str) -> None:
        w = self.w
        w.panel.set_script(str(DEMO))
        w.panel.args.setText(str(epochs))
        w.panel.method.setCurrentIndex(w.panel.method.findData(method))
        w.session.last_result = None
        w.last_report = None
        w.panel.run_button.click()
        self.wait(lambda: w.controller.busy, f"the {method} run to start")

    def finish(self, method: str) -> None:
        w = self.w
        self.wait(lambda: not w.controller.busy and w.last_result is not None, f"the {method} run to end")
        if w.last_result.status != "exited":
            raise SystemExit(f"screenshots: the {method} run {w.last_result.status}: {w.last_error}")
        self.wait(lambda: w.last_report is not None and w._report_pending is None, f"the {method} run's report")

    # -- pictures -------------------------------------------------------------------------------
    def resize(self, size: tuple[int, int]) -> None:
        w = self.w
        w.resize(*size)
        try:
            self.wait(lambda: (w.width(), w.height()) == size, f"the window to be {size[0]}x{size[1]}", 5)
        except SystemExit:    # the window will not get that small: say why, take it as it is
            print(f"screenshots: the window is {w.width()}x{w.height()}, not {size[0]}x{size[1]} (its minimum "
                  f"{w.minimumSizeHint().width()}x{w.minimumSizeHint().height()})", file=sys.stderr, flush=True)
        self.settle()

    def shoot(self, name: str, prepare=None) -> None:
        for size in SIZES:
            self.resize(size)
            if prepare is not None:
                prepare()
            self.w.tick()
            self.settle(0.4)
            path = self.out / f"{name}-{size[0]}x{size[1]}.png"
            shot = self.w.screen().grabWindow(self.w.winId())     # what the X server shows
            if shot.isNull() or shot.width() < size[0] // 2:
                shot = self.w.grab()
            if not shot.save(str(path)):
                raise SystemExit(f"screenshots: cannot write {path}")
            self.saved.append(path)
            print(f"screenshots: {path} ({shot.width()}x{shot.height()})", flush=True)
        self.resize(SIZES[0])

    def make_all(self) -> None:
        w = self.w
        for method in ("fork", "forkserver"):          # History gets a few runs
            self.start(1, method)
            self.finish(method)
        self.start(4, "spawn")
        w.tabs.setCurrentIndex(0)
        w.bottom.setCurrentWidget(w.tree)
        roles = ("main", "pool worker")

        def seen(role: str) -> bool:
            return any(r.role == role for r in w.model.procs.values())

        self.wait(lambda: (not w.controller.busy) or (w.controller.elapsed() > 2.5 and all(map(seen, roles))),
                  "the spawn pool's workers")
        self.shoot("run")                               # mid-run (or just after, on a slow machine)
        self.finish("spawn")

        def report() -> None:
            w.tabs.setCurrentWidget(w.report_view)
            self.settle(0.2)
            w.report_view.timeline.fit()
        self.shoot("report", report)

        def history() -> None:
            loaded: list[int] = []
            w.history.sigLoaded.connect(loaded.append)
            w.tabs.blockSignals(True)                 # (one refresh, the one waited for)
            w.tabs.setCurrentWidget(w.history)
            w.tabs.blockSignals(False)
            w.history.refresh()
            self.wait(lambda: bool(loaded), "the History list")
            w.history.sigLoaded.disconnect(loaded.append)
        self.shoot("history", history)
        self.shoot_help()
        self.shoot_series()
        self.shoot_gpu_lanes()
        self.shoot_torch()
        self.shoot_attach()

    def save(self, pixmap, name: str) -> None:
        path = self.out / name
        if not pixmap.save(str(path)):
            raise SystemExit(f"screenshots: cannot write {path}")
        self.saved.append(path)
        print(f"screenshots: {path} ({pixmap.width()}x{pixmap.height()})", flush=True)

    def shoot_gpu_lanes(self) -> None:
        """Two processes time-slicing GPU 0, a third alone on GPU 1 (no GPU needed: a synthetic export)."""
        from tests.gpu import synthetic_export as sx

        us = 1000

        def k(pid: int, dev: int, a: int, b: int, launch: int | None = None) -> object:
            return sx.Kernel(pid, dev, a * us, b * us, None if launch is None else launch * us)

        export = sx.Export(kernels=[k(101, 0, 0, 10), k(202, 0, 12, 22, 5), k(101, 0, 24, 34), k(202, 0, 36, 46, 20),
                                    k(101, 0, 48, 58), k(303, 1, 0, 30, 0), k(303, 1, 40, 50, 38)])
        path = sx.write(self.home / "sliced.sqlite", export, "2024.2")     # (the temporary home goes at the end)
        w = self.w
        w.last_report = None
        w.load_report(path, switch=True)
        self.wait(lambda: w.last_report is not None and w._report_pending is None, "the synthetic export")
        w.report_view.timeline.fit()
        self.settle(0.4)
        shot = w.screen().grabWindow(w.winId())
        self.save(shot if not shot.isNull() and shot.width() >= SIZES[0][0] // 2 else w.grab(), "report-gpu-lanes.png")

    def shoot_attach(self) -> None:
        """File → Attach to a running job…: a spawn pool started outside gpuscope, picked, followed,
        its stacks taken and a 5 s profile of it."""
        import signal
        import subprocess

        from gpuscope.app.run.qt_attach_dialog import QtAttachDialog

        script = self.home / "pool_job.py"
        script.write_text("import multiprocessing as mp, time\n"
                          "def burn(n):\n    return sum(i * i for i in range(n))\n"
                          "def work(n):\n    time.sleep(0.02)\n    return burn(n)\n"
                          "if __name__ == '__main__':\n    mp.set_start_method('spawn')\n"
                          "    print('ready', flush=True)\n    with mp.Pool(2) as pool:\n"
                          "        while True:\n            pool.map(work, [60_000] * 8)\n")
        job = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
        try:
            assert job.stdout is not None and job.stdout.readline()
            w, p = self.w, self.w.attach
            dialog = QtAttachDialog(w)
            dialog.show()
            self.wait(lambda: dialog.model.index_of(job.pid) is not None, "the picker to list the pool")
            dialog.select_pid(job.pid)
            self.settle(0.3)
            self.save(dialog.grab(), "attach-picker.png")
            dialog.reject()
            p.attach(job.pid)
            self.wait(lambda: p.session is not None and sum(r.role == "pool worker" for r in p.model.procs.values())
                      == 2, "the attached pool's workers")
            self.settle(3.0)
            p.tick()
            self.save(w.grab(), "attach-live.png")
            p.take_stacks()
            self.wait(lambda: p.last_stacks is not None, "the attached pool's stacks")
            self.settle(0.4)
            self.save(w.grab(), "attach-stacks.png")
            p.profile(5.0)
            self.wait(lambda: p.last_profile is not None, "the attached pool's profile")
            self.settle(0.4)
            self.save(w.grab(), "attach-profile.png")
            p.detach()
            self.wait(lambda: p.detached_run is not None, "the detach")
        finally:
            os.killpg(job.pid, signal.SIGTERM)
            job.wait(timeout=30)

    def shoot_series(self) -> None:
        """A fork vs spawn series from the launch panel: its start-up chart hovered, then History."""
        from PySide6.QtCore import QPoint
        from PySide6.QtGui import QPainter, QPixmap
        from PySide6.QtWidgets import QApplication, QToolTip

        from gpuscope.app.compare.qt_compare_startup import AXIS_H, ROW_H
        from gpuscope.views.startup_segments import segments

        w = self.w
        w.panel.set_script(str(DEMO))
        w.panel.args.setText("1")
        for method, box in w.panel.compare_methods.items():
            box.setChecked(method in ("fork", "spawn"))
        w.panel.repeat.setValue(1)
        shown: list[object] = []
        w.compare.sigShown.connect(shown.append)
        w.panel.compare_button.click()
        self.wait(lambda: bool(shown), "the fork vs spawn series", timeout=4 * self.args.timeout)
        bars = w.compare.view.startup
        self.settle(0.4)
        rows = bars.rows()
        i = next((k for k, (label, _, _) in enumerate(rows) if label == "spawn"), 0)
        drawn = segments(rows[i][2])     # the re-import of __main__, else the longest segment
        longest = next((s for s in drawn if s.name == "re-importing __main__"), max(drawn, key=lambda s: s.ms))
        x, y = bars._x((longest.start_ms + longest.end_ms) / 2), bars.top + AXIS_H + i * ROW_H + ROW_H / 2
        text = bars.tooltip_at(x, y)
        if text is None:
            raise SystemExit(f"screenshots: nothing to hover at ({x:.0f}, {y:.0f}) of the start-up chart")
        QToolTip.showText(bars.mapToGlobal(QPoint(int(x), int(y))), text, bars)   # what hovering there shows
        self.settle(0.4)
        tip = next((t for t in QApplication.topLevelWidgets() if t.inherits("QTipLabel") and t.isVisible()), None)
        if tip is None:
            raise SystemExit("screenshots: the start-up chart showed no tooltip")
        chart, tip_image = bars.grab(), tip.grab()
        # the tip where it appears, just below-right of the pointer (the screen may have moved it)
        at = QPoint(int(min(x + 12, max(0, chart.width() - tip_image.width()))), int(y + 14))
        image = QPixmap(max(chart.width(), at.x() + tip_image.width()),
                        max(chart.height(), at.y() + tip_image.height() + 2))
        image.fill(bars.palette().window().color())
        painter = QPainter(image)
        painter.drawPixmap(0, 0, chart)
        painter.drawPixmap(at, tip_image)
        painter.end()
        QToolTip.hideText()
        self.save(image, "compare-startup-hover.png")
        loaded: list[int] = []
        w.history.sigLoaded.connect(loaded.append)
        w.tabs.setCurrentWidget(w.history)
        self.wait(lambda: bool(loaded), "the History list")
        series = next((line.series for line in w.history.lines if line.series is not None), None)
        if series is None:
            raise SystemExit("screenshots: History shows no series line")
        w.history.toggle_series(series.id)
        self.settle(0.4)
        self.save(w.history.grab(), "history-series.png")

    def shoot_torch(self) -> None:
        """A 2-rank gloo DDP run with ``--torch-profile`` (CLI): its report with both ranks' torch ops
        under their NVTX steps and the Torch ops tab, then a row (aten::addmm) highlighted."""
        import json
        import subprocess

        w = self.w
        done = subprocess.run([sys.executable, "-m", "gpuscope", "run", "-q", "--json", "--launcher", "torchrun",
                               "--nproc", "2", "--torch-profile", "--torch-profile-schedule", "0,1,3", str(TORCH_DDP)],
                              capture_output=True, text=True, timeout=4 * self.args.timeout)
        if done.returncode != 0 or not done.stdout.strip():
            raise SystemExit(f"screenshots: the --torch-profile run failed: {done.stderr.strip()[-300:]}")
        view = w.report_view
        loaded: list[object] = []
        view.sigLoaded.connect(loaded.append)
        w.tabs.setCurrentWidget(view)
        view.show_run(json.loads(done.stdout.splitlines()[-1])["run_dir"])
        self.wait(lambda: bool(loaded), "the --torch-profile run's report")
        tab = view.torch_ops
        if tab is None:
            raise SystemExit("screenshots: the --torch-profile run's report has no Torch ops tab")
        view.summary.setCurrentWidget(tab)
        view.timeline.fit()
        self.settle(0.4)
        self.save(self.w.grab(), "torch-ops-report.png")
        names = tab.ops.column_values("Name")
        index = tab.ops.proxy.index(names.index("aten::addmm"), 0)
        tab.ops.view.setCurrentIndex(index)
        tab.ops.view.clicked.emit(index)
        view.timeline.fit()                      # every highlighted call, not only the longest
        self.settle(0.4)
        self.save(self.w.grab(), "torch-ops-highlight.png")

    def shoot_help(self) -> None:
        """Help → Keyboard shortcuts, the dialog alone (one size: it does not depend on the window's)."""
        w = self.w
        w.keys_action.trigger()
        dialog = w.last_help_dialog
        self.wait(lambda: dialog.isVisible(), "the shortcuts dialog")
        self.settle(0.3)
        path = self.out / "help-shortcuts.png"
        shot = dialog.screen().grabWindow(dialog.winId())
        if shot.isNull() or shot.width() < 100:
            shot = dialog.grab()
        if not shot.save(str(path)):
            raise SystemExit(f"screenshots: cannot write {path}")
        self.saved.append(path)
        print(f"screenshots: {path} ({shot.width()}x{shot.height()})", flush=True)
        dialog.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.offscreen:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    elif not os.environ.get("DISPLAY"):
        if os.environ.get(REEXEC):
            sys.exit("screenshots: xvfb-run gave no DISPLAY")
        reexec_under_xvfb(argv)
    else:
        os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    with tempfile.TemporaryDirectory(prefix="gpuscope-shots-") as tmp:
        home = Path(tmp)
        os.environ["GPUSCOPE_HOME"] = str(home / "home")     # a fresh run store: History shows these runs
        os.environ["GPUSCOPE_APP_SETTINGS"] = str(home / "settings.ini")
        sys.path.insert(0, str(ROOT))
        started = time.monotonic()
        shooter = Shooter(args, home)
        try:
            shooter.make_all()
        finally:
            shooter.w.close()
        print(f"screenshots: {len(shooter.saved)} pictures in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
