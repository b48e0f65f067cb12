"""Settings remembered between sessions (QSettings, organisation "gpuscope").

``GPUSCOPE_APP_SETTINGS=/path/file.ini`` (or ``gpuscope gui --settings``) points them at an INI
file instead of the user's settings: tests use a temporary one.
"""

from __future__ import annotations

import json
import os
from typing import Any

from PySide6.QtCore import QSettings

ORG, APP = "gpuscope", "gpuscope"
MAX_RECENT = 10
ENV = "GPUSCOPE_APP_SETTINGS"


def open_settings(path: str | None = None) -> QSettings:
    path = path or os.environ.get(ENV)
    if path:
        return QSettings(path, QSettings.Format.IniFormat)
    return QSettings(ORG, APP)


def get_json(s: QSettings, key: str, default: Any) -> Any:
    """Values are stored as JSON text: types survive every QSettings backend."""
    raw = s.value(key)
    if raw is None:
        return default
    try:
        return json.loads(str(raw))
    except ValueError:
        return default


def set_json(s: QSettings, key: str, value: Any) -> None:
    s.setValue(key, json.dumps(value))


def push_recent(s: QSettings, script: str) -> list[str]:
    recent = [script] + [r for r in get_json(s, "launch/recent", []) if r != script]
    recent = recent[:MAX_RECENT]
    set_json(s, "launch/recent", recent)
    return recent
