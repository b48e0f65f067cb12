"""The Report and Cleanup tabs, built on first use (their imports cost ~0.2 s of start-up).

Their widgets come from ``qt_report_view`` / ``qt_cleanup``; if one is missing from a build,
the tab says so instead of failing.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget


def _placeholder(text: str) -> QLabel:
    label = QLabel(text, alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
    label.setStyleSheet("color: #777; font-size: 12pt;")
    return label


def make_report_view() -> QWidget:
    """The timeline/summary widget (gpuscope.app.qt_report_view), or a placeholder until it exists."""
    try:
        from gpuscope.app.qt_report_view import QtReportView
    except ImportError:
        return _placeholder("The timeline view is not available in this build.")
    return QtReportView()


def make_cleanup_view() -> QWidget:
    try:
        from gpuscope.app.qt_cleanup import QtCleanup
    except ImportError:
        return _placeholder("The cleanup view is not available in this build.")
    return QtCleanup()
