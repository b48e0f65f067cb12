"""C modules of the standard library, imported without the Python modules they load for a feature
that gpuscope never uses (issue 14.4: every millisecond of ``gpuscope run``'s own start counts).

Two C modules do this on the run path, on Python 3.10-3.13:

* ``array`` registers its type as a ``collections.abc.MutableSequence``: that imports the
  ``collections`` package (``itertools``, ``keyword``, ``operator``, ``reprlib``): ~3-4 ms on the
  2-core runner. The class it registers with lives in ``_collections_abc``, which every
  interpreter has loaded at start (``os`` needs it): the stand-in hands it that very class, so the
  registration is the same and ``isinstance(a, collections.abc.MutableSequence)`` holds later.
* ``_sqlite3`` (3.11 on) takes ``functools.lru_cache`` for each connection's cache of prepared
  statements: ``functools`` imports ``collections`` and ``types`` and compiles a named tuple, ~6 ms.
  The stand-in's ``lru_cache`` makes the same C cache (``_functools._lru_cache_wrapper``, which
  ``functools.lru_cache`` calls too); only its ``cache_info()``, which nothing calls, would answer
  a plain tuple.

:func:`load` puts a stand-in into ``sys.modules`` only for a name that nothing has loaded, only
for the import of that C module, holding the interpreter's import lock, and takes it out again:
anything that imports ``functools`` or ``collections`` afterwards gets the real modules. An
``import`` in another thread at that very moment could still be handed the stand-in, so
:func:`load` uses stand-ins only while gpuscope has no other thread running (no
:class:`gpuscope.threads.LeanThread` alive, ``threading`` not loaded); otherwise it imports as
usual. ``gpuscope run`` loads both in its main thread, before it starts any thread.
"""

from __future__ import annotations

import sys

from gpuscope import threads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Callable


def load(name: str, stand_ins: dict[str, Callable[[], ModuleType]]) -> ModuleType:
    """The C module ``name``, imported with each of ``stand_ins`` (module name -> maker) in
    ``sys.modules`` in place of a module that is not loaded yet, when that is safe (above)."""
    import _imp

    if name in sys.modules or "threading" in sys.modules or threads.running():
        return __import__(name)
    _imp.acquire_lock()   # no other import runs meanwhile
    placed: dict[str, ModuleType] = {}
    try:
        for module_name, make in stand_ins.items():
            if module_name not in sys.modules:
                placed[module_name] = sys.modules[module_name] = make()
        return __import__(name)
    finally:
        for module_name, stand_in in placed.items():
            if sys.modules.get(module_name) is stand_in:
                del sys.modules[module_name]
        _imp.release_lock()


def _module(name: str, **attrs: Any) -> ModuleType:
    module = type(sys)(name)
    module.__dict__.update(attrs)
    return module


def lru_cache(maxsize: int | None = 128, typed: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """``functools.lru_cache(maxsize, typed)`` as ``_sqlite3`` calls it (``cache_info()`` aside)."""
    import _functools

    def decorate(func: Callable[..., Any]) -> Any:
        return _functools._lru_cache_wrapper(func, maxsize, typed, tuple)

    return decorate


def _functools_stand_in() -> ModuleType:
    return _module("functools", lru_cache=lru_cache)


def _collections_abc() -> ModuleType:
    import _collections_abc   # loaded with os at every interpreter's start (but under -S)

    return _collections_abc


def _collections_stand_in() -> ModuleType:
    return _module("collections", abc=_collections_abc())


def sqlite3() -> ModuleType:
    """``_sqlite3``: connections, rows, cursors and exceptions are ``sqlite3``'s own objects."""
    return load("_sqlite3", {"functools": _functools_stand_in})


array = load("array", {"collections": _collections_stand_in, "collections.abc": _collections_abc}).array
