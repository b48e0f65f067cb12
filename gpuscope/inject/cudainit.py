"""The moment CUDA starts in this process, for every part of the hook that needs it.

torch calls ``torch.cuda._lazy_init`` once when CUDA first initialises (from Python and from C++).
One wrapper of it (never one per subscriber) calls each callback once, right after it returned
with CUDA initialised, with the frame that called it; then the original is put back, so later
calls go straight through. A callback given while CUDA is already initialised runs at once, with
no frame (where it started is unknown). The wrapper returns what the original returned and lets
its errors through unchanged. Standard library only; never raises into the program.
"""

import sys

from .disguise import disguise

_S: dict = {"callbacks": [], "cuda": None}


def when_initialised(cuda, callback):
    """Call ``callback(frame or None)`` once CUDA is initialised in this process."""
    try:
        if cuda.is_initialized():
            callback(None)
            return
        _S["callbacks"].append(callback)
        if _S["cuda"] is cuda:
            return                               # wrapped already: one more callback on it
        original = getattr(cuda, "_lazy_init", None)
        if original is None:
            return
    except Exception:
        return

    def _lazy_init(*args, **kwargs):
        result = original(*args, **kwargs)       # the program's own errors pass through unchanged
        try:
            if cuda.is_initialized():
                if getattr(cuda, "_lazy_init", None) is _lazy_init:
                    cuda._lazy_init = original
                _S["cuda"] = None
                callbacks, _S["callbacks"] = _S["callbacks"], []
                frame = sys._getframe(1)
                for cb in callbacks:
                    try:
                        cb(frame)
                    except Exception:
                        pass
        except Exception:
            pass
        return result

    cuda._lazy_init = disguise(_lazy_init, original, _gpuscope_wrapped=True)
    _S["cuda"] = cuda
