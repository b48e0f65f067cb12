"""``--annotate MODULE:QUALNAME`` (globs allowed): ranges around chosen functions, no edits.

Patterns reach a module right after it is imported (a post-import hook), including modules
imported later by the program. The script itself (``__main__``) is never "imported", so its
functions are wrapped at the first moments gpuscope gets control after they exist: when the
script creates a ``Pool``, a ``ProcessPoolExecutor`` or starts a ``Process`` (parent and child),
and in spawn children right after the script is re-imported as ``__mp_main__``. Use the module
name ``__main__`` (or the script's file name without ``.py``) for the script's functions.
"""

import fnmatch
import functools
import os
import sys
import types

from .eventlog import STATE

MAIN_NAMES = ("__main__", "__mp_main__")


def parse(text):
    patterns = []
    for item in (text or "").split("\n"):
        item = item.strip()
        if ":" in item:
            module, qualname = item.split(":", 1)
            if module and qualname:
                patterns.append((module, qualname))
    return patterns


PATTERNS = parse(os.environ.get("GPUSCOPE_ANNOTATE", ""))
_SCRIPT_MODULE = os.path.splitext(os.path.basename(os.environ.get("GPUSCOPE_SCRIPT", "")))[0]


def _module_matches(pattern, module_name):
    if module_name in MAIN_NAMES:
        return pattern in MAIN_NAMES or (bool(_SCRIPT_MODULE) and pattern == _SCRIPT_MODULE)
    return fnmatch.fnmatchcase(module_name, pattern)


def wants(module_name):
    return any(_module_matches(m, module_name) for m, _ in PATTERNS if module_name not in MAIN_NAMES)


def _wrap(func, label):
    if getattr(func, "__gpuscope_wrapped__", False):
        return func
    from .nvtxwrap import call_in_range

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return call_in_range("func", label, func, args, kwargs)

    wrapper.__gpuscope_wrapped__ = True
    return wrapper


def _candidates(module):
    """(qualname, owner, attribute, function) for functions and methods defined in ``module``."""
    name = module.__name__
    for attr, value in list(vars(module).items()):
        if isinstance(value, types.FunctionType) and value.__module__ == name:
            yield value.__qualname__, module, attr, value
        elif isinstance(value, type) and value.__module__ == name:
            for mattr, mvalue in list(vars(value).items()):
                func = mvalue.__func__ if isinstance(mvalue, (staticmethod, classmethod)) else mvalue
                if isinstance(func, types.FunctionType):
                    yield func.__qualname__, value, mattr, mvalue


def apply(module):
    """Wrap the functions of ``module`` that the patterns name."""
    try:
        chosen = [q for m, q in PATTERNS if _module_matches(m, module.__name__)]
        if not chosen:
            return 0
        count = 0
        for qualname, owner, attr, value in list(_candidates(module)):
            if not any(fnmatch.fnmatchcase(qualname, q) for q in chosen):
                continue
            label = qualname
            if isinstance(value, staticmethod):
                setattr(owner, attr, staticmethod(_wrap(value.__func__, label)))
            elif isinstance(value, classmethod):
                setattr(owner, attr, classmethod(_wrap(value.__func__, label)))
            else:
                setattr(owner, attr, _wrap(value, label))
            count += 1
        return count
    except Exception as exc:
        STATE.error("--annotate on %s" % getattr(module, "__name__", "?"), exc)
        return 0


def apply_to_main():
    if not PATTERNS:
        return
    for name in MAIN_NAMES:
        module = sys.modules.get(name)
        if module is not None:
            apply(module)
