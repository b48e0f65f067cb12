"""``--annotate MODULE:QUALNAME`` (globs allowed): ranges around chosen functions, no edits.

Where patterns are applied:

* modules already imported when the hook starts, at once; modules imported later, right after
  they execute (a post-import hook);
* the script itself (``__main__``, or the script's / ``-m`` module's name): from the first call,
  see :mod:`.maintrace`; also whenever the script creates a ``Pool``, a ``ProcessPoolExecutor`` or
  starts a ``Process`` (parent and child), and in spawn children after the script is re-imported.

``Class.method`` also matches a method the class inherits: the wrapper is set on the named class
only (labelled ``Class.method``), the base class and its other subclasses are left alone.

What each pattern matched goes to the event log (``I`` lines, key ``annotate``); a pattern that
matched nothing in a process gets ``annotate_missed`` with the closest names the hook saw there.
"""

import os
import sys as _sys

from .eventlog import STATE

MAIN_NAMES = ("__main__", "__mp_main__")
_IMPL = __name__.rsplit(".", 1)[0] + ".nvtxwrap"


def parse(text):
    patterns = []
    for item in (text or "").split("\n"):
        item = item.strip()
        if ":" in item:
            module, qualname = item.split(":", 1)
            if module and qualname:
                patterns.append((module, qualname))
    return patterns


_FUNCTION = type(parse)   # types.FunctionType, without importing types into every process
PATTERNS = parse(os.environ.get("GPUSCOPE_ANNOTATE", ""))
_SCRIPT_MODULE = (os.environ.get("GPUSCOPE_MODULE")
                  or os.path.splitext(os.path.basename(os.environ.get("GPUSCOPE_SCRIPT", "")))[0])
_matched: dict = {}        # "module:qualname" -> set of labels wrapped in this process
_seen_modules: dict = {}   # "module:qualname" -> names of modules the module part matched


if PATTERNS:  # only with --annotate (fnmatch pulls in re); before the import hook can ask
    from fnmatch import fnmatchcase as _fnmatch


def _module_matches(pattern, module_name):
    if module_name in MAIN_NAMES:
        return pattern in MAIN_NAMES or (bool(_SCRIPT_MODULE) and pattern == _SCRIPT_MODULE)
    return _fnmatch(module_name, pattern)


def wants(module_name):
    return module_name not in MAIN_NAMES and any(_module_matches(m, module_name) for m, _ in PATTERNS)


def main_patterns():
    """The patterns that name the script's own functions."""
    return [(m, q) for m, q in PATTERNS if _module_matches(m, "__main__")]


def _wrap(func, label, owner=None, attr=None):
    """A wrapper recording a range per call. It pickles like ``func`` (by reference under the
    same module/qualname; by value it refers only to ``sys`` and calls ``func`` directly in a
    process without gpuscope)."""
    if getattr(func, "__gpuscope_wrapped__", False):
        return func
    impl_name, kind = _IMPL, "func"

    def wrapper(*args, **kwargs):
        impl = _sys.modules.get(impl_name)
        if impl is None:
            return func(*args, **kwargs)
        try:
            return impl.call_in_range(kind, label, func, args, kwargs)
        except BaseException as exc:
            impl.hide_frames(exc)
            raise

    from functools import update_wrapper

    update_wrapper(wrapper, func)
    if owner is not None:  # an inherited method, now set on ``owner``: pickled as owner.attr
        wrapper.__qualname__ = "%s.%s" % (owner.__qualname__, attr)
        wrapper.__module__ = owner.__module__
    wrapper.__gpuscope_wrapped__ = True
    return wrapper


def _function_of(value):
    func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    return func if isinstance(func, _FUNCTION) else None


def _candidates(module, qualname_patterns):
    """(label, owner, attribute, raw value, inherited) for what ``module`` defines, plus the
    inherited methods of its classes that a ``Class.method`` pattern names."""
    name = module.__name__
    class_patterns = [q.rsplit(".", 1) for q in qualname_patterns if "." in q]
    for attr, value in list(vars(module).items()):
        if isinstance(value, _FUNCTION) and value.__module__ == name:
            yield value.__qualname__, module, attr, value, False
        elif isinstance(value, type) and value.__module__ == name:
            own = vars(value)
            for mattr, mvalue in list(own.items()):
                func = _function_of(mvalue)
                if func is not None:
                    yield func.__qualname__, value, mattr, mvalue, False
            for cls_pat, meth_pat in class_patterns:
                if _fnmatch(value.__qualname__, cls_pat):
                    yield from _inherited(value, meth_pat, own)


def _inherited(cls, meth_pat, own):
    for attr in dir(cls):
        if attr in own or not _fnmatch(attr, meth_pat):
            continue
        for base in cls.__mro__[1:]:
            raw = vars(base).get(attr)
            if raw is not None:
                if _function_of(raw) is not None:
                    yield "%s.%s" % (cls.__qualname__, attr), cls, attr, raw, True
                break


def _set_wrapped(owner, attr, value, label, inherited):
    args = (label, owner, attr) if inherited else (label,)
    if isinstance(value, staticmethod):
        setattr(owner, attr, staticmethod(_wrap(value.__func__, *args)))
    elif isinstance(value, classmethod):
        setattr(owner, attr, classmethod(_wrap(value.__func__, *args)))
    else:
        setattr(owner, attr, _wrap(value, *args))


def apply(module):
    """Wrap the functions of ``module`` that the patterns name; returns how many."""
    try:
        chosen = [(m, q) for m, q in PATTERNS if _module_matches(m, module.__name__)]
        if not chosen:
            return 0
        for m, q in chosen:
            _seen_modules.setdefault("%s:%s" % (m, q), set()).add(module.__name__)
        count, grew = 0, False
        for label, owner, attr, value, inherited in list(_candidates(module, [q for _, q in chosen])):
            hits = ["%s:%s" % (m, q) for m, q in chosen if _fnmatch(label, q)]
            if not hits:
                continue
            _set_wrapped(owner, attr, value, label, inherited)
            count += 1
            for key in hits:
                labels = _matched.setdefault(key, set())
                grew = grew or label not in labels
                labels.add(label)
        if grew:
            STATE.update(annotate={k: sorted(v) for k, v in _matched.items()})
        return count
    except Exception as exc:
        STATE.error("--annotate on %s" % getattr(module, "__name__", "?"), exc)
        return 0


def apply_to_main():
    if not PATTERNS:
        return
    for name in MAIN_NAMES:
        module = _sys.modules.get(name)
        if module is not None:
            apply(module)


def apply_to_imported():
    """Modules imported before the hook started (by Python's start-up or by gpuscope itself)."""
    for name, module in list(_sys.modules.items()):
        if module is not None and wants(name):
            apply(module)


def report_missed():
    """At exit: for each pattern that matched nothing here, the closest names this process has."""
    try:
        missed = {}
        for module_pat, qual_pat in PATTERNS:
            key = "%s:%s" % (module_pat, qual_pat)
            if key in _matched:
                continue
            from .annotate_suggest import suggestions

            missed[key] = suggestions(module_pat, qual_pat, _seen_modules.get(key, ()), _sys.modules)
        if missed:
            STATE.update(annotate_missed=missed)
    except Exception as exc:
        STATE.error("--annotate summary", exc)
