"""``gpuscope gui``: open the desktop app (also what ``gpuscope`` with no arguments does).

Qt is imported only here, inside :func:`run`, so the other commands never pay for it. With
``--run SCRIPT`` the app fills the launch panel, runs the script, and with ``--screenshot`` saves
a picture of the window once the run and its report are done (``--exit-when-done`` then quits):
the README's screenshots are made this way.
"""

from __future__ import annotations

import argparse

from gpuscope import numpy_import
from gpuscope.spec import LAUNCHERS, START_METHODS

DESCRIPTION = ("Open the gpuscope window. With --run SCRIPT, run it at once; with --screenshot, save "
               "a picture of the window when the run and its report are done (for docs and CI).")
SHOT_TABS = ("launch", "live", "processes", "console", "timeline", "report", "history", "cleanup", "compare")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--open", metavar="REPORT", help="open a .nsys-rep, .sqlite export or run folder")
    p.add_argument("--host", metavar="[USER@]HOST[:PORT]", help="open connected to this host (over ssh; "
                   "File → Connect to host… does it later); re-attaches to a run still going there")
    g = p.add_argument_group("run a script at once")
    g.add_argument("--run", metavar="SCRIPT", help="the script to run (fills the launch panel and presses Run)")
    g.add_argument("--args", default="", metavar="'ARGS'", help="its arguments, as one shell-quoted string")
    g.add_argument("--start-method", choices=START_METHODS)
    g.add_argument("--launcher", choices=LAUNCHERS)
    g.add_argument("--nproc", type=int, help="torchrun: processes per node")
    g.add_argument("--python", help="interpreter to run the script with")
    g.add_argument("--cwd", help="working directory")
    g.add_argument("--annotate", action="append", default=[], metavar="MODULE:QUALNAME")
    g.add_argument("--nsys", action="store_true", help="record the run under nsys profile")
    c = p.add_argument_group("compare")
    c.add_argument("--compare", nargs="+", metavar="RUN", help="open the Compare tab on these recorded runs "
                   "(ids or unique prefixes; runs that differ only by start method are grouped by it)")
    c.add_argument("--compare-methods", metavar="M1,M2[,M3]", type=_methods,
                   help="with --run: run the script under each start method, alternated, and compare them "
                        "(e.g. fork,spawn)")
    c.add_argument("--repeat", type=int, default=3, metavar="N", help="with --compare-methods: runs per "
                   "method (default 3)")
    s = p.add_argument_group("scripted screenshots")
    s.add_argument("--screenshot", metavar="OUT.png", help="save a picture of the window when the run "
                   "(or --open) and its report are done")
    s.add_argument("--screenshot-tab", choices=SHOT_TABS, default=None,
                   help="what to show in the picture (launch: the filled panel, before the run starts); "
                        "default: compare with --compare/--compare-methods, else live")
    s.add_argument("--screenshot-delay", type=float, metavar="S",
                   help="take the picture S seconds after the run started (a live view mid-run)")
    s.add_argument("--size", default="1280x800", metavar="WxH", help="window size for the picture")
    s.add_argument("--exit-when-done", action="store_true", help="quit when the run, its report and the "
                   "screenshot are done; the exit code is the run's (0 ok, 1 failed)")
    p.add_argument("--settings", metavar="FILE.ini", help=argparse.SUPPRESS)
    p.add_argument("--quit-after-show", action="store_true", help=argparse.SUPPRESS)


def _methods(text: str) -> list[str]:
    from gpuscope.errors import UserError
    from gpuscope.runs.series import parse_methods

    try:
        return parse_methods(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("--start-methods", "--compare-methods")) from None


def run(args: argparse.Namespace) -> int:
    numpy_import.preload()   # before anything loads numpy: one BLAS thread, env put back
    from gpuscope.app.main import check_display, run_app
    from gpuscope.app.qtcheck import check_qt

    check_display(args)  # first: a scripted run without a display goes offscreen and needs no xcb
    check_qt()  # before anything imports Qt widgets
    if getattr(args, "host", None):
        from gpuscope.remote.hostspec import HostSpec

        HostSpec.parse(args.host)    # a bad host is one line here, before the window opens
        from gpuscope.app.remote.presenter import CONNECT_AT_START

        CONNECT_AT_START.append(args.host)
    return run_app(args)
