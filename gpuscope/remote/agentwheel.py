"""The agent's wheel, sent to a remote host by the bootstrap (gpuscope/remote/bootstrap.py): built
from this gpuscope's checkout with ``pip wheel --no-deps``, or, for a gpuscope installed without
a checkout, written from the installed distribution's own files (its RECORD); cached by version
and build in the workstation's cache folder; a pure copy for a remote whose Python the compiled
wheel does not fit."""

from __future__ import annotations

import base64
import csv
import fcntl
import functools
import hashlib
import importlib.metadata
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Callable, Iterator
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
        wheels = sorted(folder.glob("*.whl"))
        # the compiled one first; a gpuscope installed without its C helpers is pure from the start
        built = [p for p in wheels if not _is_pure(p)] or wheels
        if not built:
            if progress is not None:
                progress(f"building the agent's wheel of gpuscope {__version__}", 0.01)
            built = [build_wheel(folder)]
            for old in folder.parent.iterdir():   # earlier builds of this gpuscope
                if old.is_dir() and old != folder and old.name.startswith(f"{__version__}-"):
                    shutil.rmtree(old, ignore_errors=True)
        wheel = built[0]
        py, _, platform = python_tag.partition("-")
        if _is_pure(wheel) or f"-{py}-" in wheel.name and wheel.name.endswith(f"-{platform}.whl"):
            return wheel
        pure = folder / wheel.name.replace(wheel.name.split("-", 2)[2], "py3-none-any.whl")
        if not pure.exists():
            _purify(wheel, pure)
        return pure


def _is_pure(wheel: Path) -> bool:
    return wheel.name.endswith("-py3-none-any.whl")


def build_wheel(folder: Path) -> Path:
    """This gpuscope's wheel, made in ``folder``: from its checkout when it runs from one, else
    from the installed distribution."""
    source = package_dir().parent
    if not (source / "pyproject.toml").is_file():
        return installed_wheel(folder)
    return _checkout_wheel(source, folder)


def _checkout_wheel(source: Path, folder: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the checkout (the build never writes into it)."""
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


# Files an installer writes beside the metadata, and the two this wheel writes anew: not copied.
_NOT_COPIED = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "WHEEL")
# A shebang naming a Python: the installer put its own interpreter there; a wheel says "#!python".
_PYTHON_SHEBANG = re.compile(rb"^#!.*python[0-9.]*([ \t].*)?$")


def installed_wheel(folder: Path, dist: importlib.metadata.Distribution | None = None) -> Path:
    """A wheel of the installed gpuscope (or ``dist``), written in ``folder``: the files its
    RECORD lists (not bytecode, not an installer's own), its metadata, a fresh RECORD; tagged for
    this Python when it holds compiled modules, else ``py3-none-any``."""
    if dist is None:
        try:
            dist = importlib.metadata.distribution("gpuscope")
        except importlib.metadata.PackageNotFoundError:
            raise UserError(f"cannot build the agent's wheel: gpuscope at {package_dir()} is neither a source "
                            f"checkout nor an installed distribution; reinstall gpuscope {__version__}") from None
    site = Path(os.path.normpath(str(dist.locate_file(""))))
    info, files = _installed_files(dist, site)
    data_dir = info.removesuffix(".dist-info") + ".data"
    members = _members(dist, site, info, data_dir, files)
    compiled = any(rel.endswith(".so") for rel, _ in members)
    tag = _this_python_tag() if compiled else "py3-none-any"
    target = folder / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    tmp = target.with_suffix(".partial")
    rows = []
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, path in members:
                data = path.read_bytes()
                if name.startswith(f"{data_dir}/scripts/"):
                    data = _wheel_shebang(data)
                rows.append(_write_member(zf, name, data, path))
            rows.append(_write_member(zf, f"{info}/WHEEL", _wheel_file(dist.read_text("WHEEL"), compiled, tag), None))
            zf.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot build the agent's wheel from the installed gpuscope in {site}: "
                        f"{exc.strerror or exc} ({exc.filename or target})") from None
    return target


def _members(dist: importlib.metadata.Distribution, site: Path, info: str, data_dir: str,
             files: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """(name in the wheel, file) of each installed file that belongs in the wheel."""
    scripts = {ep.name for ep in dist.entry_points if ep.group in ("console_scripts", "gui_scripts")}
    skip = {f"{info}/{name}" for name in _NOT_COPIED}
    members = []
    for rel, path in files:
        if not path.is_relative_to(site):
            if path.parent.name == "bin" and path.name not in scripts:   # entry points' scripts pip makes anew
                members.append((f"{data_dir}/scripts/{path.name}", path))
        elif not (rel.endswith(".pyc") or "__pycache__/" in rel or rel in skip):
            members.append((rel, path))
    return members


def _installed_files(dist: importlib.metadata.Distribution, site: Path) -> tuple[str, list[tuple[str, Path]]]:
    """(the dist-info folder's name, [(RECORD path, file)]); a missing or damaged RECORD, or a
    file it lists that is gone, is one line."""
    fix = f"reinstall gpuscope {__version__} (pip install --force-reinstall gpuscope=={__version__})"
    text = dist.read_text("RECORD")
    if text is None:
        raise UserError(f"cannot build the agent's wheel: the installed gpuscope in {site} has no RECORD "
                        f"(its list of files); {fix}")
    files: list[tuple[str, Path]] = []
    info = ""
    for number, row in enumerate(_record_rows(text), 1):
        if not row:
            continue
        if len(row) != 3 or not row[0]:
            raise UserError(f"cannot build the agent's wheel: the installed gpuscope's RECORD in {site} is damaged "
                            f"(line {number}); {fix}")
        rel = row[0]
        if rel.endswith(".dist-info/RECORD"):
            info = rel.rpartition("/")[0]
        path = Path(os.path.normpath(site / rel))
        if not path.is_file():
            raise UserError(f"cannot build the agent's wheel: {path}, listed in the installed gpuscope's RECORD, "
                            f"is missing; {fix}")
        files.append((rel, path))
    if not info or "/" in info:
        raise UserError(f"cannot build the agent's wheel: the installed gpuscope's RECORD in {site} does not "
                        f"list itself (damaged); {fix}")
    return info, files


def _record_rows(text: str) -> Iterator[list[str]]:
    try:
        yield from csv.reader(io.StringIO(text))
    except csv.Error:
        yield ["damaged"]   # reported by the caller as that line's damage


def _wheel_file(installed: str | None, compiled: bool, tag: str) -> bytes:
    """The WHEEL file: the installed one's lines (its generator) with this wheel's purity and tag."""
    lines = [ln for ln in (installed or "Wheel-Version: 1.0\nGenerator: gpuscope agentwheel\n").splitlines()
             if ln.strip() and not ln.startswith(("Root-Is-Purelib:", "Tag:"))]
    ours = [f"Root-Is-Purelib: {str(not compiled).lower()}", f"Tag: {tag}"]
    return ("\n".join([*lines, *ours]) + "\n\n").encode()


def _this_python_tag() -> str:
    """This interpreter's full wheel tag, as ``cp311-cp311-linux_x86_64``."""
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    abi = py + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")
    return f"{py}-{abi}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def _wheel_shebang(data: bytes) -> bytes:
    """A script's first line as it was in the wheel: ``#!python`` (the installer writes its own)."""
    first, nl, rest = data.partition(b"\n")
    match = _PYTHON_SHEBANG.match(first.rstrip(b"\r"))
    return b"#!python" + (match.group(1) or b"") + nl + rest if match else data


def _write_member(zf: zipfile.ZipFile, name: str, data: bytes, source: Path | None) -> str:
    """Add one file (mode and time from ``source``); its RECORD row."""
    if source is not None:
        info = zipfile.ZipInfo.from_file(source, name, strict_timestamps=False)
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, data)
    else:
        zf.writestr(name, data)
    sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={sha},{len(data)}"
