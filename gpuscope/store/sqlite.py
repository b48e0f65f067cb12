"""``sqlite3`` for the run path: the C module ``_sqlite3`` that the ``sqlite3`` package wraps.

``import sqlite3`` also runs ``sqlite3.dbapi2``, whose ``import datetime`` (with ``math``) costs
~3 ms of every ``gpuscope run`` on a 2-core runner (issue 14.4) for the adapters of ``date`` and
``datetime`` values that it registers, which gpuscope never stores. ``connect``, ``Row``,
``Connection``, ``Cursor`` and the exceptions are the same objects in both, so a connection made
here is the ``sqlite3.Connection`` that any other module knows. ``_sqlite3`` is loaded without
``functools`` where that is safe (gpuscope/cimport.py). Use: ``from gpuscope.store.sqlite import
sqlite3``.
"""

from __future__ import annotations

from gpuscope import cimport

try:
    sqlite3 = cimport.sqlite3()
except ImportError:  # pragma: no cover - an interpreter without it: the package (which needs it too) says why
    import sqlite3  # type: ignore[no-redef]

__all__ = ["sqlite3"]
