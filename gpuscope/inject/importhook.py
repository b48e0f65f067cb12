"""Run a callback right after a module is imported (a post-import hook).

One finder sits at the front of ``sys.meta_path``; for names it does not watch it returns None
after one dict lookup. For a watched name it finds the real spec, wraps the loader's
``exec_module`` and calls the callbacks once the module has executed.
"""

import sys

from .eventlog import STATE

_callbacks: dict = {}      # module name -> [callback(module)]
_predicates: list = []     # [(predicate(name) -> bool, callback)]
_busy: set = set()


class _Finder:
    """A meta path finder (a plain class: ``importlib.abc`` is a heavy import for every process)."""

    def find_spec(self, name, path=None, target=None):
        if name in _busy or (name not in _callbacks and not _predicates):
            return None
        callbacks = list(_callbacks.get(name, ()))
        for predicate, callback in _predicates:
            try:
                if predicate(name):
                    callbacks.append(callback)
            except Exception as exc:
                STATE.error("import hook predicate", exc)
        if not callbacks:
            return None
        _busy.add(name)
        try:
            # Ask the other finders in their order (pytest's assertion rewriter, editable installs,
            # ...), exactly as the import system would have without us.
            spec = None
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            _busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        _wrap_loader(spec, callbacks)
        return spec


def _wrap_loader(spec, callbacks):
    loader = spec.loader
    original = loader.exec_module

    def exec_module(module):
        original(module)
        for callback in callbacks:
            try:
                callback(module)
            except Exception as exc:
                STATE.error("post-import hook for %s" % module.__name__, exc)

    try:
        loader.exec_module = exec_module
    except (AttributeError, TypeError):
        pass


_FINDER = _Finder()


def install():
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def when_imported(name, callback):
    """Call ``callback(module)`` after ``name`` is imported (at once if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        try:
            callback(module)
        except Exception as exc:
            STATE.error("post-import hook for %s" % name, exc)
        return
    _callbacks.setdefault(name, []).append(callback)


def when_imported_matching(predicate, callback):
    """Call ``callback(module)`` after any module whose name satisfies ``predicate`` is imported."""
    _predicates.append((predicate, callback))
