"""The desktop app: every Qt and pyqtgraph import of gpuscope lives in this package.

Nothing here is imported by the core or the CLI until ``gpuscope gui`` runs; modules without a
``qt_`` prefix (``series``, ``live_model``, ``procroles``, ``launch_checks``) are Qt-free helpers
that only shape the core's data for display.

PySide6 6.12.0 is excluded in pyproject.toml: under CPython < 3.12 it drops a reference to
None/True/False on every void call and ``Signal.emit``, and the interpreter aborts after a few
thousand calls.
"""
