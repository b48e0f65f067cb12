"""GPU tests: Qt (the lane test) draws offscreen."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")   # before any Qt import
