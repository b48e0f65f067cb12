"""The ``gpuscope`` command: a thin dispatcher to ``gpuscope.commands.<name>`` modules.

Each command module defines ``add_arguments(parser)`` and ``run(args) -> int`` (and may define
``DESCRIPTION`` for its ``--help``); its one-line help is in :data:`COMMANDS` here. Modules are
imported only when their command runs, so ``gpuscope run`` never pays for Qt and ``gpuscope
report`` never pays for psutil.

Errors never reach the user as a traceback: :class:`gpuscope.errors.UserError` prints one line;
anything unexpected prints one line that names a log file holding the traceback.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
from typing import Any

from gpuscope import __version__
from gpuscope.errors import UserError, log_internal_error

# name -> one-line help. The module is gpuscope.commands.<name>.
COMMANDS = {
    "gui": "open the desktop app (the default)",
    "run": "run a script in a managed, annotated process tree",
    "history": "list past runs",
    "report": "read an Nsight Systems report or a gpuscope run",
    "doctor": "check Nsight Systems, nvtx and NVML on this machine",
    "monitor": "print live GPU, process and host telemetry",
    "cleanup": "find and clean up leftover processes and shared memory",
    "compare": "compare two runs side by side",
    "findings": "what went wrong in a run: findings with evidence and fixes",
    "stacks": "the Python stacks of every process of a running (or stuck) run",
    "attach": "follow a running Python job gpuscope did not start (tree, roles, stacks, findings)",
}


def _load(name: str) -> Any:
    return importlib.import_module(f"gpuscope.commands.{name}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage is one `--help` away)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpuscope",
        description="Profile multi-process, multi-GPU Python programs.",
    )
    parser.add_argument("--version", action="version", version=f"gpuscope {__version__}")
    parser.add_argument("--host", metavar="[USER@]HOST[:PORT]",
                        help="run the command on another machine over ssh (paths are that machine's; docs/REMOTE.md)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # Only the chosen command's module is imported: the others get a bare entry for --help, and
    # none at all once a command is named (its own parser reads the rest of the line).
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, help_text in COMMANDS.items():
        if chosen in COMMANDS and name != chosen:
            continue
        if name == chosen:
            module = _load(name)
            p = sub.add_parser(name, help=help_text, description=getattr(module, "DESCRIPTION", help_text))
            module.add_arguments(p)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _internal_error(exc: BaseException) -> int:
    where = log_internal_error(exc, f"argv={sys.argv!r}")
    print(f"gpuscope: internal error: {type(exc).__name__}: {exc}{where}", file=sys.stderr)
    return 70


# Commands that end their process at once when run as the program (see _exit_at_once).
FAST_EXIT = ("run",)


def main(argv: list[str] | None = None) -> int:
    """The ``gpuscope`` program (``argv`` None: ``sys.argv``), or a command called in-process."""
    command: list[str] = []
    code = _main(list(sys.argv[1:] if argv is None else argv), command, ends_process=argv is None)
    if argv is None and command and command[0] in FAST_EXIT:
        _exit_at_once(code)
    return code


def _exit_at_once(code: int) -> None:
    """End the process now that the command's work is done and recorded: exit handlers run and
    the standard streams are flushed as at a normal exit, but the interpreter's teardown of every
    module (numpy, sqlite3, psutil, ...) is skipped. Not while another non-daemon thread runs (a
    normal exit waits for it): then it returns. gpuscope's own threads are daemon threads."""
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()   # prints a handler's error as the interpreter would, goes on
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)   # as the interpreter truncates sys.exit(code)


def _host_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--host H`` (or ``--host=H``) before the command: (H, the rest), else (None, argv)."""
    if argv and argv[0] == "--host":
        return (argv[1] if len(argv) > 1 else ""), argv[2:]
    if argv and argv[0].startswith("--host="):
        return argv[0].partition("=")[2], argv[1:]
    return None, argv


def _main(argv: list[str], command: list[str], ends_process: bool = False) -> int:
    """Run the command line ``argv`` (its command's name goes into ``command``). ``ends_process``:
    this is the ``gpuscope`` program, so a FAST_EXIT command's process ends by ``_exit_at_once``
    right after; the command reads it as ``args.ends_process``."""
    host, argv = _host_option(argv)
    if host is not None and argv[:1] in (["-h"], ["--help"]):
        argv, host = argv[:1], None   # help before a command is this program's own, which names --host
    if host and argv[:1] in ([], ["gui"]):
        argv, host = ["gui", "--host", host, *argv[1:]], None   # the window connects itself (commands/gui.py)
    if host is None and (not argv or argv[0] not in COMMANDS and argv[0].startswith("-")
                         and argv[0] not in ("-h", "--help", "--version")):
        argv = ["gui", *argv]
    try:
        if host is not None:   # gpuscope --host H COMMAND ...: the command runs there
            from gpuscope.remote import cli as remote_cli   # only when asked: ssh, the protocol

            command.append("remote")
            return remote_cli.main(host, argv)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args(["gui"])
        command.append(args.command)
        args.ends_process = ends_process and args.command in FAST_EXIT
        return int(_load(args.command).run(args) or 0)
    except UserError as exc:
        print(f"gpuscope: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpuscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 141
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        return _internal_error(exc)


if __name__ == "__main__":
    raise SystemExit(main())
