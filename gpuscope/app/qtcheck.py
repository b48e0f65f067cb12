"""Refuse, in one line, the Qt builds the app cannot run on, and name the system libraries Qt's
xcb plugin lacks (checked before any widget exists: Qt aborts the process when no platform
plugin loads)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

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
    problem = xcb_problem()
    if problem:
        raise UserError(problem)


# -- Qt's xcb platform plugin (Linux desktops) ------------------------------------------------------
# A fresh Linux machine often lacks some libraries Qt's xcb plugin links to, and Qt then aborts with
# only "could not load the Qt platform plugin". Each library, with the Debian/Ubuntu and the Fedora
# package that holds it.
XCB_PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libSM.so.6": ("libsm6", "libSM"),
    "libICE.so.6": ("libice6", "libICE"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
}


def xcb_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether Qt will try its xcb plugin first: on Linux, with QT_QPA_PLATFORM unset or naming xcb first."""
    environ = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return False
    first = (environ.get("QT_QPA_PLATFORM") or "xcb").split(";")[0].split(":")[0].strip()
    return first == "xcb"


def xcb_plugin() -> Path | None:
    """PySide6's libqxcb.so, found without importing Qt."""
    spec = importlib.util.find_spec("PySide6")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if path.is_file():
            return path
    return None


def missing_libraries(library: Path) -> list[str]:
    """The shared libraries ``library`` needs that the dynamic loader cannot find (``ldd``)."""
    try:
        out = subprocess.run(["ldd", str(library)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []      # no ldd: say nothing rather than guess
    missing: list[str] = []
    for line in out.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def install_line(missing: list[str]) -> str:
    """What to install, for Debian/Ubuntu and for Fedora."""
    known = [XCB_PACKAGES[m] for m in missing if m in XCB_PACKAGES]
    debian = " ".join(dict.fromkeys(d for d, _ in known))
    fedora = " ".join(dict.fromkeys(f for _, f in known))
    if not known:
        return "install the packages that provide them"
    return f"sudo apt-get install {debian} (Debian/Ubuntu) or sudo dnf install {fedora} (Fedora)"


def xcb_problem(plugin: Path | None = None, env: "dict[str, str] | None" = None) -> str | None:
    """One line naming the libraries Qt's xcb plugin lacks and how to install them; None when
    Qt will not use xcb, or the plugin has all it needs."""
    if plugin is None:
        if not xcb_wanted(env):
            return None
        plugin = xcb_plugin()
        if plugin is None:
            return None
    missing = missing_libraries(plugin)
    return f"{xcb_detail(missing)}; {xcb_advice(missing)}" if missing else None


def xcb_detail(missing: list[str]) -> str:
    return f"Qt's xcb platform plugin cannot load: missing {', '.join(missing)}"


def xcb_advice(missing: list[str]) -> str:
    return f"{install_line(missing)}; without a screen, set QT_QPA_PLATFORM=offscreen"
