# PyInstaller runtime hook (runs before gpuscope in the frozen app).
# The runs' processes are the user's own Python, never this executable: tell gpuscope so
# (gpuscope.views.launch_checks.default_python reads it) and keep Qt's plugin lookup inside the bundle.
import os
import sys

os.environ.setdefault("GPUSCOPE_FROZEN", "1")
if getattr(sys, "frozen", False):
    os.environ.pop("QT_PLUGIN_PATH", None)
