"""Work around a PySide6 6.12 reference-count bug on CPython 3.11 and older.

PySide6/shiboken6 6.12.0 returns ``None`` from void methods (``QLabel.setText``...) and
``True``/``False`` from ``Signal.emit`` without taking a reference. On CPython < 3.12, where these
singletons are still reference counted, every such call drops one reference; after a few
thousand calls (a minute of live plotting) CPython aborts with "Fatal Python error:
none_dealloc" / "bool_dealloc". 6.11.3 does not do this (checked with a probe that calls
``setText`` and ``emit`` 1,000 times and compares ``sys.getrefcount``). CPython 3.12 made these
objects immortal (PEP 683); :func:`guard_singletons` gives them the same protection on older
interpreters by adding a large constant to their reference counts, which is all that PEP 683
does for them. Remove this module when PySide6 6.12 is excluded or Python 3.12 is the minimum.
"""

from __future__ import annotations

import sys

_done = False


def affected(pyside_version: tuple[int, ...], python_version: tuple[int, ...] = tuple(sys.version_info)) -> bool:
    return python_version[:2] < (3, 12) and tuple(pyside_version[:2]) >= (6, 12)


def guard_singletons() -> bool:
    """Protect None/True/False when the bug can bite; True if it did (idempotent)."""
    global _done
    if _done:
        return True
    if sys.implementation.name != "cpython":
        return False
    import PySide6

    if not affected(tuple(PySide6.__version_info__[:2])):
        return False
    import ctypes

    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40   # ob_refcnt is the first field
    _done = True
    return True
