"""Find Nsight Systems (nsys) installs: the real CLI binary, its version and its importer.

Search order (first hit wins for :func:`find_nsys`):

1. ``GPUSCOPE_NSYS`` (path to an nsys binary, or to a folder holding one);
2. ``nsys`` on ``PATH``;
3. the usual install folders: ``/usr/local/cuda*/bin``, ``/opt/nvidia/nsight-systems/*/bin``,
   ``/usr/lib/nsight-systems``, ``/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64``;
4. the cache filled by ``scripts/provision_nsys.py`` (``<cache>/nsys/<version>/``), newest first.

Every hit is resolved to the real binary under ``target-linux-x64/``: the ``bin/nsys`` links and
wrapper scripts were seen to hang a profile (docs/NSYS-RECORDING.md).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from gpuscope.errors import UserError
from gpuscope.paths import cache_dir

NOT_FOUND = "Nsight Systems (nsys) not found; install it or run scripts/provision_nsys.py"
MARKER = "gpuscope-nsys.json"  # written by scripts/provision_nsys.py
DEBIAN_TARGET = "usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64"
DEBIAN_HOST = "usr/lib/nsight-systems/host-linux-x64"
SYSTEM_GLOBS = (
    "/usr/local/cuda*/bin/nsys",
    "/usr/local/cuda*/nsight-systems-*/target-linux-x64/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/lib/nsight-systems/bin/nsys",
    "/" + DEBIAN_TARGET + "/nsys",
)
_VERSION = re.compile(r"(\d{4})\.(\d+)\.(\d+)(?:\.(\d+))?")
_version_cache: dict[tuple[str, float], str | None] = {}


@dataclass(frozen=True)
class NsysInstall:
    """One usable nsys: the real CLI, its version and the importer that turns .qdstrm into .nsys-rep."""

    nsys: Path
    version: str                      # "2022.4.2.1"
    version_tuple: tuple[int, ...]    # (2022, 4, 2, 1)
    importer: Path | None
    env: dict[str, str] = field(default_factory=dict)  # additions for the importer and `nsys export`
    source: str = "PATH"              # GPUSCOPE_NSYS | PATH | system | cache

    @property
    def release(self) -> str:
        """``"2022.4"``: the year.release part that decides the report format."""
        return ".".join(str(v) for v in self.version_tuple[:2])

    def tool_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: os.environ) plus :attr:`env`, path lists prepended."""
        env = dict(os.environ if base is None else base)
        for key, value in self.env.items():
            env[key] = f"{value}:{env[key]}" if env.get(key) and key.endswith("PATH") else value
        return env

    def describe(self) -> str:
        return f"nsys {self.version} at {self.nsys}"


def parse_version(text: str) -> tuple[str, tuple[int, ...]] | None:
    """("2022.4.2.1", (2022, 4, 2, 1)) from ``nsys --version`` output or a folder name."""
    m = _VERSION.search(text)
    if not m:
        return None
    parts = tuple(int(g) for g in m.groups() if g is not None)
    return ".".join(map(str, parts)), parts


def real_binary(path: str | Path, _depth: int = 0) -> Path | None:
    """The real nsys executable behind ``path`` (symlinks, CUDA's wrapper script), or None."""
    real = Path(os.path.realpath(path))
    if not real.is_file() or not os.access(real, os.X_OK) or _depth > 3:
        return None
    if real.parent.name == "target-linux-x64":
        return real
    sibling = real.parent.parent / "target-linux-x64" / "nsys"  # <install>/bin/nsys -> target-linux-x64
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return sibling
    try:
        head = real.read_bytes()[:4096]
    except OSError:
        return None
    if head.startswith(b"#!"):  # a wrapper script, e.g. /usr/local/cuda/bin/nsys
        for m in re.finditer(rb"(/[\w./+-]*/nsys)\b", head):
            target = m.group(1).decode()
            if os.path.realpath(target) != str(real):
                found = real_binary(target, _depth + 1)
                if found:
                    return found
        return None
    return real


def _importer_for(nsys: Path) -> Path | None:
    """``host-linux-x64/QdstrmImporter`` beside ``target-linux-x64`` (NVIDIA) or in Debian's split layout."""
    target = nsys.parent
    candidates = [target.parent / "host-linux-x64" / "QdstrmImporter"]
    text = str(target)
    if text.endswith(DEBIAN_TARGET):
        root = text[: -len(DEBIAN_TARGET)] or "/"
        candidates.append(Path(root) / DEBIAN_HOST / "QdstrmImporter")
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def _run_version(nsys: Path) -> str | None:
    try:
        key = (str(nsys), nsys.stat().st_mtime)
    except OSError:
        return None
    if key not in _version_cache:
        try:
            proc = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, timeout=30,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
            parsed = parse_version(proc.stdout + proc.stderr) if proc.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            parsed = None
        _version_cache[key] = parsed[0] if parsed else None
    return _version_cache[key]


def install_at(path: str | Path, source: str) -> NsysInstall | None:
    """An :class:`NsysInstall` for the nsys at ``path`` (binary, link, wrapper or folder), or None."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = next((p for p in (path / "nsys", path / "bin" / "nsys", path / "target-linux-x64" / "nsys",
                                 path / DEBIAN_TARGET / "nsys") if p.is_file()), path / "nsys")
    nsys = real_binary(path)
    if nsys is None:
        return None
    marker = _marker_for(nsys)
    version = marker.get("nsys_version") if marker else None
    version = version or _run_version(nsys)
    parsed = parse_version(version or "")
    if not parsed:
        return None
    env = {}
    if marker:
        root = Path(str(nsys)[: -len(DEBIAN_TARGET + "/nsys")])
        libs = [str(root / p) for p in marker.get("ld_library_path", [])]
        if libs:
            env["LD_LIBRARY_PATH"] = ":".join(libs)
    return NsysInstall(nsys, parsed[0], parsed[1], _importer_for(nsys), env, source)


def _marker_for(nsys: Path) -> dict | None:
    """The provisioning marker when ``nsys`` lives in a tree unpacked by provision_nsys.py."""
    text = str(nsys)
    if not text.endswith(DEBIAN_TARGET + "/nsys"):
        return None
    try:
        return json.loads((Path(text[: -len(DEBIAN_TARGET + "/nsys")]) / MARKER).read_text())
    except (OSError, ValueError):
        return None


def provisioned_dirs() -> list[Path]:
    """``<cache>/nsys/<version>`` folders holding a provisioning marker, newest version first."""
    base = cache_dir() / "nsys"
    dirs = [d for d in base.glob("*") if (d / MARKER).is_file()] if base.is_dir() else []
    return sorted(dirs, key=lambda d: tuple(int(x) for x in re.findall(r"\d+", d.name)), reverse=True)


def provisioned_installs() -> dict[str, NsysInstall]:
    """Release ("2022.4") -> install, for every build scripts/provision_nsys.py unpacked."""
    found: dict[str, NsysInstall] = {}
    for d in provisioned_dirs():
        inst = install_at(d / DEBIAN_TARGET / "nsys", "cache")
        if inst:
            found.setdefault(inst.release, inst)
    return found


def _candidates() -> list[tuple[str, str]]:
    cands: list[tuple[str, str]] = []
    on_path = shutil.which("nsys")
    if on_path:
        cands.append((on_path, "PATH"))
    for pattern in SYSTEM_GLOBS:
        cands += [(p, "system") for p in sorted(glob.glob(pattern), reverse=True)]
    cands += [(str(d / DEBIAN_TARGET / "nsys"), "cache") for d in provisioned_dirs()]
    return cands


def _from_env() -> NsysInstall | None:
    value = os.environ.get("GPUSCOPE_NSYS")
    if not value:
        return None
    inst = install_at(value, "GPUSCOPE_NSYS")
    if inst is None:
        raise UserError(f"GPUSCOPE_NSYS={value} is not a working nsys binary")
    return inst


def list_installs() -> list[NsysInstall]:
    """Every nsys found, in search order, each real binary once."""
    found: list[NsysInstall] = []
    seen: set[Path] = set()
    first = _from_env()
    if first:
        found.append(first)
        seen.add(first.nsys)
    for path, source in _candidates():
        real = real_binary(path)
        if real is None or real in seen:
            continue
        seen.add(real)
        inst = install_at(real, source)
        if inst:
            found.append(inst)
    return found


def find_nsys(prefer: str | None = None) -> NsysInstall:
    """The nsys to record with: the first found, or the first whose version starts with ``prefer``.

    ``prefer`` is a version prefix ("2022.4", "2024.2.3"). Raises UserError when none matches.
    """
    if prefer is None:
        first = _from_env()
        if first:
            return first
    installs = list_installs()
    if prefer is not None:
        matching = [i for i in installs if i.version == prefer or i.version.startswith(prefer.rstrip(".") + ".")]
        if not matching:
            have = ", ".join(i.version for i in installs) or "none"
            raise UserError(f"Nsight Systems {prefer} not found (found: {have}); "
                            f"run scripts/provision_nsys.py --versions {prefer}")
        return matching[0]
    if not installs:
        raise UserError(NOT_FOUND)
    return installs[0]
