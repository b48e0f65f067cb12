"""The recent hosts of File → Connect to host…, kept in the app's settings (host names only: no
password or key is ever stored; ssh's own config and agent hold those)."""

from __future__ import annotations

from PySide6.QtCore import QSettings

from gpuscope.app.settings import get_json, set_json

KEY = "remote/recent"
MAX_HOSTS = 10


def recent_hosts(s: QSettings) -> list[str]:
    return [str(h) for h in get_json(s, KEY, []) if isinstance(h, str) and h]


def push_host(s: QSettings, host: str) -> list[str]:
    """``host`` first in the list (once), the list cut to MAX_HOSTS."""
    hosts = ([host] + [h for h in recent_hosts(s) if h != host])[:MAX_HOSTS]
    set_json(s, KEY, hosts)
    return hosts
