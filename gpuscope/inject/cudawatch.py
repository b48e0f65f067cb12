"""A fork made after CUDA was initialised in the forking process (the ``cuda_at_fork`` I line).

A CUDA context does not survive ``fork``: a child that uses CUDA fails with "Cannot re-initialize
CUDA in forked subprocess" (torch) or worse. Nothing runs at interpreter start: when the program
imports ``torch.cuda``, ``torch.cuda._lazy_init`` (what torch calls once when CUDA first
initialises, from Python and from C++) is wrapped to remember the first frame of the program's
own code on the stack at that moment (the call that initialised CUDA), and a before-fork handler
is registered. At each ``os.fork`` it asks ``torch.cuda.is_initialized()`` (it never initialises
CUDA itself) and, if so, writes ``{"cuda_at_fork": {"t_wall_ns", "init_site", "forks",
"dataloader_forks"}}``: forks made by a torch DataLoader starting its workers are counted apart
(workers that never touch CUDA are the usual, working pattern).

Standard library only; never raises into the program; returns what the wrapped call returned.
"""

import os
import sys
import time

_S = {"site": None, "forks": 0, "registered": False, "cuda": None}
_SKIP = ("/torch/", "\\torch\\", "/gpuscope/inject/", "<frozen", "/importlib/", "/multiprocessing/")


def _state():
    from .eventlog import STATE

    return STATE


def caller_site(frame):
    """``file:line in function`` of the first frame outside torch, gpuscope and the import system."""
    while frame is not None:
        code = frame.f_code
        if not any(s in code.co_filename for s in _SKIP):
            return "%s:%d in %s" % (code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def _for_dataloader():
    """Is this fork a torch DataLoader starting its workers? (They forking after CUDA is the usual,
    working pattern as long as the workers do not use CUDA.)"""
    frame = sys._getframe(2)
    while frame is not None:
        if "/torch/utils/data/" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _before_fork():
    try:
        cuda = _S["cuda"]
        if cuda is None or not cuda.is_initialized():
            return
        key = "dataloader_forks" if _for_dataloader() else "forks"
        _S[key] = _S.get(key, 0) + 1
        _state().update(cuda_at_fork={"t_wall_ns": time.time_ns(), "init_site": _S["site"],
                                      "forks": _S["forks"], "dataloader_forks": _S.get("dataloader_forks", 0)})
    except Exception:
        pass


def _after_fork_in_child():
    _S["forks"] = _S["dataloader_forks"] = 0


def on_torch_cuda(cuda):
    """Right after ``torch.cuda`` is imported (or at once if it already was)."""
    from . import cudainit

    try:
        _S["cuda"] = cuda
        if not _S["registered"]:
            _S["registered"] = True
            os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
    except Exception:
        return
    cudainit.when_initialised(cuda, _initialised)


def _initialised(frame):
    """CUDA has just started (``frame``: the call that started it; None: it had before we looked)."""
    if frame is not None and _S["site"] is None:
        _S["site"] = caller_site(frame)

