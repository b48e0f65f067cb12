"""Start the app: the QApplication, the main window, the error hooks, and scripted mode."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from gpuscope.errors import UserError

T_IMPORT = time.monotonic()


def check_display(args: argparse.Namespace) -> None:
    """Scripted screenshots work without a display (offscreen); an interactive window needs one."""
    if os.environ.get("QT_QPA_PLATFORM") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    if args.screenshot or args.exit_when_done or args.quit_after_show:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        return
    raise UserError("no display: set DISPLAY (or WAYLAND_DISPLAY), or use `gpuscope run` / `gpuscope report` "
                    "in a terminal")


def icon_path() -> Path:
    return Path(__file__).resolve().parent / "resources" / "gpuscope.svg"


def make_app():
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from gpuscope import APP_ID

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "gpuscope"])
    app.setOrganizationName("gpuscope")
    app.setApplicationName("gpuscope")
    app.setDesktopFileName(APP_ID)
    if icon_path().exists():
        app.setWindowIcon(QIcon(str(icon_path())))
    return app


def run_app(args: argparse.Namespace) -> int:
    """``gpuscope gui``: returns the exit code."""
    check_display(args)
    app = make_app()
    from gpuscope.app import bridge
    from gpuscope.app.error_sink import install_hooks
    from gpuscope.app.qt_main_window import MainWindow
    from gpuscope.app.settings import open_settings

    window = MainWindow(open_settings(args.settings))
    install_hooks(lambda line: bridge.to_gui(window.show_error, line))
    script = None
    if args.run or args.open or args.compare or args.screenshot or args.exit_when_done:
        script = _scripted(window, args)
    window.show()
    if args.quit_after_show:
        from PySide6.QtCore import QTimer

        def shown() -> None:
            print(f"gpuscope: window shown {time.monotonic() - T_IMPORT:.3f} s after the app module loaded",
                  flush=True)
            window.close()
            app.quit()

        QTimer.singleShot(0, shown)
    if script is not None:
        script.begin()
    code = app.exec()
    return script.exit_code if script is not None else code


def _scripted(window: Any, args: argparse.Namespace) -> Any:
    """Scripted mode (app/scripted.py) over the window's parts; unattended, errors go to stderr."""
    from gpuscope.app.scripted import Scripted, ScriptParts, parse_size

    window.show_dialogs = not (args.screenshot or args.exit_when_done)
    window.resize(*parse_size(args.size))
    window.sigErrorShown.connect(lambda text: print(f"gpuscope: {text}", file=sys.stderr, flush=True))
    parts = ScriptParts(window.panel, window.controller, window.compare, window.history, window.reports,
                        picture=lambda tab: _picture(window, tab), close=window.close)
    return Scripted(parts, args)


def _picture(window: Any, tab: str) -> Any:
    """The window showing ``tab`` (launch, live, processes, console, report, history, cleanup, compare)."""
    from PySide6.QtWidgets import QApplication

    if tab in ("launch", "live", "processes", "console"):
        window.tabs.setCurrentWidget(window.run_tab)
        window.bottom.setCurrentWidget(window.console if tab == "console" else window.tree)
        if tab != "launch" and not window.controller.busy:
            window.live.set_whole_run()
    elif tab in ("timeline", "report"):
        window.tabs.setCurrentWidget(window.report_view)
    elif tab == "history":
        window.tabs.blockSignals(True)             # (no second refresh: the table is filled)
        window.tabs.setCurrentWidget(window.history)
        window.tabs.blockSignals(False)
    elif tab == "cleanup":
        window.tabs.setCurrentWidget(window.cleanup)
    elif tab == "compare":
        window.tabs.setCurrentWidget(window.compare.view)
    for _ in range(3):
        window.tick()
        QApplication.processEvents()   # (runs the timeline's fit() queued by the tab change)
    return window.grab()
