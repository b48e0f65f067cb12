"""The desktop app: every Qt and pyqtgraph import of gpuscope lives in this package.

Nothing here is imported by the core or the CLI until ``gpuscope gui`` runs; modules without a
``qt_`` prefix (``series``, ``live_model``, ``procroles``, ``launch_checks``) are Qt-free helpers
that only shape the core's data for display.
"""
