"""Torch caching-allocator memory, reported from inside a user process (runs in user code).

Standard library only; never raises into the program. Design (docs/TELEMETRY.md, "Torch
allocator memory"): no thread until CUDA is really in use. ``start`` arranges, through the
injection's post-import hook, that ``torch.cuda._lazy_init`` is wrapped right after
``torch.cuda`` is imported. torch calls ``_lazy_init`` once when CUDA first initializes (from C++
through ``torch.cuda._lazy_init``, and from the Python ``torch.cuda`` functions). When it
returns with CUDA initialized, the wrapper starts one daemon thread and puts the original
function back. A process that never initializes CUDA, with or without torch, gets no thread and
pays one dictionary lookup per import. (A CUDA process already has driver threads, so our thread
adds no new fork hazard.)

The thread reads ``memory_allocated``, ``memory_reserved`` and ``max_memory_allocated`` for each
device the process has used, every ``interval_s``, and calls ``emit({"torch_mem": {...}})`` when
the values change, and at least once a second while CUDA is in use. It never imports torch and
never initializes CUDA.
"""

import os
import sys
import time

KEEPALIVE_S = 1.0
_state = {"pid": None, "thread": None, "emit": None, "interval": 0.1, "hooked": False, "stop": None}


def start(emit, interval_s):
    """Report torch allocator memory through ``emit`` once CUDA is initialized. Idempotent."""
    try:
        _state["emit"] = emit
        _state["interval"] = max(0.02, float(interval_s))
        if _state["pid"] != os.getpid():
            _state["pid"], _state["thread"] = os.getpid(), None
        cuda = sys.modules.get("torch.cuda")
        if cuda is not None:
            _on_torch_cuda(cuda)
        elif not _state["hooked"]:
            _state["hooked"] = True
            from . import importhook

            importhook.install()
            importhook.when_imported("torch.cuda", _on_torch_cuda)
    except Exception:
        pass  # reporting torch memory is optional; the program must not notice a failure


def _on_torch_cuda(cuda):
    """Right after ``torch.cuda`` is imported (or at start if it already was)."""
    from . import cudainit

    cudainit.when_initialised(cuda, lambda _frame: _ensure_thread())


def _ensure_thread():
    thread = _state["thread"]
    if thread is not None and thread.is_alive() and _state["pid"] == os.getpid():
        return
    import threading  # only once CUDA is in use (torch has imported it by then)

    if _state["stop"] is None:
        _state["stop"] = threading.Event()
    _state["pid"] = os.getpid()
    thread = threading.Thread(target=_loop, name="gpuscope-torchmem", daemon=True)
    _state["thread"] = thread
    thread.start()


def read(cuda):
    """``{device: {"allocated", "reserved", "max_allocated"}}`` for devices this process used."""
    out = {}
    for i in range(cuda.device_count()):
        reserved = cuda.memory_reserved(i)
        peak = cuda.max_memory_allocated(i)
        if reserved or peak:
            out[str(i)] = {"allocated": cuda.memory_allocated(i), "reserved": reserved,
                           "max_allocated": peak}
    return out


def _loop():
    last, last_emit, failures = None, 0.0, 0
    stop = _state["stop"]
    while not stop.wait(_state["interval"]):
        try:
            torch = sys.modules.get("torch")
            cuda = getattr(torch, "cuda", None)
            if cuda is None or not cuda.is_initialized():
                continue
            snap = read(cuda)
            now = time.monotonic()
            if snap and (snap != last or now - last_emit >= KEEPALIVE_S):
                _state["emit"]({"torch_mem": snap})
                last, last_emit = snap, now
        except Exception:
            failures += 1
            if failures >= 10:
                return  # something is wrong with this torch: stop quietly


def _after_fork_in_child():
    # The reporting thread does not survive fork; a child that initializes CUDA starts its own.
    _state["pid"], _state["thread"] = os.getpid(), None


try:
    os.register_at_fork(after_in_child=_after_fork_in_child)
except Exception:
    pass
