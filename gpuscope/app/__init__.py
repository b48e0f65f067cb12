"""The desktop app: every Qt and pyqtgraph import of gpuscope lives in this package.

Nothing here is imported by the core or the CLI until ``gpuscope gui`` runs; modules without a
``qt_`` prefix (``series``, ``live_model``, ``procroles``, ``launch_checks``) are Qt-free helpers
that only shape the core's data for display.
"""

from gpuscope.app.qtcompat import guard_singletons as _guard_singletons

_guard_singletons()   # PySide6 6.12 + CPython < 3.12 refcount bug: see qtcompat.py
