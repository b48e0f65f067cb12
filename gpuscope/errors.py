"""The one exception type the CLI and the app turn into a one-line message, and the one log that
keeps the traceback of anything unexpected (the CLI, the app and the remote agent write it)."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix (bad input, missing tool). Shown as one line, no traceback."""


ERROR_LOG = "gpuscope-errors.log"   # in the data folder


def log_internal_error(exc: BaseException, context: str) -> str:
    """Append ``exc``'s traceback to the error log under a header naming ``context``; returns
    " (details in PATH)" for the one line the user sees, or "" when the log cannot be written."""
    import time
    import traceback

    from gpuscope import __version__, paths

    try:
        log = paths.data_dir() / ERROR_LOG
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} gpuscope {__version__} {context}\n")
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
    except OSError:
        return ""
    return f" (details in {log})"
