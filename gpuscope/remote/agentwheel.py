"""The agent's wheel, sent to a remote host by the bootstrap (gpuscope/remote/bootstrap.py): built
from this gpuscope's checkout with ``pip wheel --no-deps``, cached by version and build in the
workstation's cache folder; a pure copy for a remote whose Python the compiled wheel does not fit."""

from __future__ import annotations

import base64
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from gpuscope import __version__, paths
from gpuscope.errors import UserError

Progress = Callable[[str, "float | None"], None]


def package_dir() -> Path:
    """The installed ``gpuscope`` package folder."""
    return Path(__file__).resolve().parents[1]


@functools.cache   # this process's build: the code it loaded, even if the files change later
def agent_build() -> str:
    """A digest of this gpuscope's package files: the agent is the same build as this one."""
    digest = hashlib.sha256()
    top = package_dir()
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".so")):
                continue
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, top).encode() + b"\0")
            with open(path, "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()[:16]


def agent_wheel(python_tag: str, progress: Progress | None = None) -> Path:
    """The wheel to send: built once per version and build; the compiled one when the remote's
    Python matches its tag, else a pure one (the C helpers have numpy fallbacks)."""
    folder = paths.cache_dir() / "agent-wheels" / f"{__version__}-{agent_build()}"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".build.lock", "a") as lock:   # one build at a time (parallel connects)
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = sorted(p for p in folder.glob("*.whl") if not p.name.endswith("-py3-none-any.whl"))
        if not built:
            if progress is not None:
                progress(f"building the agent's wheel of gpuscope {__version__}", 0.01)
            built = [_build_wheel(folder)]
            for old in folder.parent.iterdir():   # earlier builds of this checkout
                if old.is_dir() and old != folder and old.name.startswith(f"{__version__}-"):
                    shutil.rmtree(old, ignore_errors=True)
        wheel = built[0]
        py, _, platform = python_tag.partition("-")
        if f"-{py}-" in wheel.name and wheel.name.endswith(f"-{platform}.whl"):
            return wheel
        pure = folder / wheel.name.replace(wheel.name.split("-", 2)[2], "py3-none-any.whl")
        if not pure.exists():
            _purify(wheel, pure)
        return pure


def _build_wheel(folder: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the checkout (the build never writes into it)."""
    source = package_dir().parent
    if not (source / "pyproject.toml").is_file():
        raise UserError(f"cannot install the agent: this gpuscope ({package_dir()}) is not a source checkout; "
                        f"install gpuscope {__version__} on the remote host with pip")
    with tempfile.TemporaryDirectory(prefix="gpuscope-wheel-") as tmp:
        copy = Path(tmp) / "src"
        copy.mkdir()
        for entry in source.iterdir():
            if entry.name in ("pyproject.toml", "setup.py", "README.md", "packaging", "gpuscope", "LICENSE"):
                if entry.is_dir():
                    shutil.copytree(entry, copy / entry.name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
                else:
                    shutil.copy2(entry, copy / entry.name)
        out = Path(tmp) / "out"
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                               "-w", str(out), str(copy)], capture_output=True, text=True)
        wheels = sorted(out.glob("gpuscope-*.whl")) if proc.returncode == 0 else []
        if not wheels:
            last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "no wheel made")
            raise UserError(f"cannot build the agent's wheel from {source}: {last.strip()}")
        target = folder / wheels[0].name
        shutil.move(str(wheels[0]), target)
        return target


def _purify(wheel: Path, pure: Path) -> None:
    """A copy of ``wheel`` without compiled modules, tagged for any Python 3."""
    tmp = pure.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        rows = []
        for info in src.infolist():
            name = info.filename
            if name.endswith(".so") or name == record_name:
                continue
            data = src.read(name)
            if name.endswith(".dist-info/WHEEL"):
                text = data.decode().replace("Root-Is-Purelib: false", "Root-Is-Purelib: true")
                lines = [ln for ln in text.splitlines() if not ln.startswith("Tag:")] + ["Tag: py3-none-any"]
                data = ("\n".join(lines) + "\n").encode()
            dst.writestr(name, data)
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={sha},{len(data)}")
        dst.writestr(record_name, "\n".join([*rows, f"{record_name},,"]) + "\n")
    tmp.replace(pure)
