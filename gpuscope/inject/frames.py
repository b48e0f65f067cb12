"""Keep gpuscope's own frames out of the user's tracebacks.

Every wrapper gpuscope puts between the user's code and the code it calls catches exceptions only
to call :func:`hide_frames` and re-raise them unchanged. A bare ``raise`` does not add the
re-raising frame again (Python >= 3.11 takes the traceback from ``exc.__traceback__``), so the
traceback the user sees is the one the program would have without gpuscope. Python 3.10 keeps
the traceback of a re-raise on the interpreter's stack: there the outermost wrapper's own line
stays (inner gpuscope frames are removed).
"""

import os

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _ours(tb):
    return tb.tb_frame.f_code.co_filename.startswith(_HERE)


def hide_frames(exc):
    """Remove gpuscope's entries from ``exc``'s traceback (in place); never raises."""
    try:
        tb = exc.__traceback__
        while tb is not None and _ours(tb):
            tb = tb.tb_next
        if tb is not exc.__traceback__:
            exc.__traceback__ = tb
        while tb is not None:
            nxt = tb.tb_next
            if nxt is not None and _ours(nxt):
                tb.tb_next = nxt.tb_next
            else:
                tb = nxt
    except Exception:
        pass
    return exc
