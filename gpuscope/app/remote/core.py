"""The app's one core handle: :mod:`gpuscope.api` itself, or a remote host's
:class:`~gpuscope.remote.client.RemoteCore`. Every view calls the core through ``core()``, so the
window drives a remote host through the same calls it uses locally."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuscope import api

if TYPE_CHECKING:
    from gpuscope.remote.client import RemoteCore

_remote: RemoteCore | None = None


def core() -> Any:
    """What the views call: ``gpuscope.api`` here, or the connected host's client core."""
    return _remote if _remote is not None else api


def remote() -> RemoteCore | None:
    """The connected host's core, or None when the window shows this machine."""
    return _remote


def use(remote_core: RemoteCore | None) -> None:
    """Point every view at ``remote_core`` (None: back to this machine)."""
    global _remote
    _remote = remote_core


def host() -> str | None:
    """The host the window shows (None: this machine)."""
    return _remote.host if _remote is not None else None


def data_dir() -> str:
    """The gpuscope data folder of the machine the window shows."""
    if _remote is not None:
        return str(_remote.hello.get("data_dir") or f"{_remote.host}: gpuscope's data folder")
    from gpuscope import paths

    return str(paths.data_dir())


def run_python() -> str | None:
    """The interpreter a run uses on the connected host when none is chosen (None: this machine's)."""
    if _remote is None:
        return None
    return str(_remote.hello.get("python_path") or "python3")
