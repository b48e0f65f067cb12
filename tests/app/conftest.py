"""Qt tests run offscreen (minimal; the app-shell engineer owns and extends this file)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
