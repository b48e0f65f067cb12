"""Refuse, in one line, the Qt builds the app cannot run on (checked before any widget exists)."""

from __future__ import annotations

import sys

from gpuscope.errors import UserError


def check_qt() -> None:
    try:
        import PySide6
    except ImportError:
        raise UserError("the desktop app needs PySide6: pip install 'PySide6-Essentials<6.12'") from None
    # 6.12.0 drops a reference to None/True/False on every void call under CPython < 3.12, and the
    # interpreter aborts after a few thousand calls (see pyproject.toml).
    if tuple(PySide6.__version_info__[:2]) >= (6, 12) and sys.version_info < (3, 12):
        raise UserError(f"PySide6 {PySide6.__version__} crashes under Python {sys.version_info[0]}."
                        f"{sys.version_info[1]} (a reference-count bug in void calls); "
                        "pip install 'PySide6-Essentials<6.12'")
