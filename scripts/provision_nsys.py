#!/usr/bin/env python3
"""Fetch Debian's Nsight Systems packages and unpack them into a private cache (stdlib only).

    python3 scripts/provision_nsys.py [--versions 2022.4,2023.4,2024.2] [--dest DIR]

Each version lands in ``<dest>/<version>/`` (default dest: ``$GPUSCOPE_CACHE/nsys`` or
``~/.cache/gpuscope/nsys``) as the ``dpkg -x`` of ``nsight-systems-target`` (the ``nsys`` CLI) and
``nsight-systems`` (the ``QdstrmImporter``), plus the importer's libraries (``libssh-4``;
``libarrow500``/``libparquet500`` for 2024.2) unpacked into the same root, so the packages' own
relative ``libssh.so`` link resolves. The system's apt sources and state are never touched: apt
runs with a private sources file, list folder and cache under ``<dest>/.apt``.

A version whose marker file ``<dest>/<version>/gpuscope-nsys.json`` exists is skipped, so a rerun
costs well under a second. See docs/NSYS-RECORDING.md.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = "gpuscope-nsys.json"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
NSYS_REL = "usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys"
IMPORTER_REL = "usr/lib/nsight-systems/host-linux-x64/QdstrmImporter"
LIB_REL = "usr/lib/x86_64-linux-gnu"


@dataclass(frozen=True)
class Release:
    """One Nsight Systems release as Debian ships it."""

    key: str              # "2022.4": the folder name under dest
    suite: str            # Debian suite whose non-free component carries it
    extra: tuple[str, ...]  # further packages from the same suite, unpacked into the same root


RELEASES = {
    "2022.4": Release("2022.4", "bookworm", ()),
    "2023.4": Release("2023.4", "trixie", ()),
    "2024.2": Release("2024.2", "experimental", ("libarrow500", "libparquet500")),
}
# The importer's libssh.so comes from the host's own release (Debian 12: bookworm main).
LIBSSH = "libssh-4"


class ProvisionError(Exception):
    """A one-line reason why provisioning failed."""


def log(msg: str) -> None:
    print(f"provision_nsys: {msg}", flush=True)


def default_dest() -> Path:
    """``gpuscope.paths.cache_dir() / "nsys"``, computed without importing gpuscope's dependencies."""
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    try:
        from gpuscope.paths import cache_dir
    except ImportError:  # the script copied elsewhere: same rule as gpuscope.paths
        env = os.environ.get("GPUSCOPE_CACHE")
        base = Path(env).expanduser() if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuscope"
        return base / "nsys"
    finally:
        sys.path.pop(0)
    return cache_dir() / "nsys"


def debian_mirror() -> str:
    """The Debian URI the machine already uses (so a local mirror keeps working); GPUSCOPE_DEBIAN_MIRROR wins."""
    env = os.environ.get("GPUSCOPE_DEBIAN_MIRROR")
    if env:
        return env.rstrip("/")
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            try:
                texts.append(path.read_text(errors="replace"))
            except OSError:
                continue
    for text in texts:
        for m in re.finditer(r"^\s*(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+/debian)/?\s", text, re.M):
            return m.group(1).rstrip("/")
    raise ProvisionError("no Debian mirror in /etc/apt/sources.list[.d]; set GPUSCOPE_DEBIAN_MIRROR to one")


class Apt:
    """apt-get with a private sources file, list folder and cache; the system's are untouched."""

    def __init__(self, state: Path, mirror: str):
        self.state = state
        self.mirror = mirror
        self.entries: set[tuple[str, str]] = set()
        for sub in ("lists/partial", "cache/archives/partial"):
            (state / sub).mkdir(parents=True, exist_ok=True)

    def _opts(self) -> list[str]:
        opts = [
            f"Dir::Etc::SourceList={self.state / 'sources.list'}",
            "Dir::Etc::SourceParts=/dev/null",
            f"Dir::State::Lists={self.state / 'lists'}",
            f"Dir::Cache={self.state / 'cache'}",
            "Acquire::Languages=none",
        ]
        if os.geteuid() == 0:
            opts.append("APT::Sandbox::User=root")
        return [x for o in opts for x in ("-o", o)]

    def run(self, args: list[str], cwd: Path | None = None, timeout: float = 1800) -> str:
        cmd = ["apt-get", "-q", *self._opts(), *args]
        try:
            proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            raise ProvisionError("apt-get not found: this script needs a Debian-based system") from None
        except subprocess.TimeoutExpired:
            raise ProvisionError(f"apt-get {args[0]} took longer than {timeout:.0f} s") from None
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.startswith(("E:", "Err"))]
            raise ProvisionError(f"apt-get {' '.join(args)} failed: {(lines or ['exit %d' % proc.returncode])[-1]}")
        return proc.stdout + proc.stderr

    def need(self, *entries: tuple[str, str]) -> None:
        """Make sure the lists for each (suite, component) are present (one ``apt-get update``)."""
        missing = set(entries) - self.entries
        if not missing:
            return
        self.entries |= missing
        signed = f"[signed-by={KEYRING}] " if Path(KEYRING).exists() else ""
        lines = [f"deb {signed}{self.mirror} {s} {c}" for s, c in sorted(self.entries)]
        (self.state / "sources.list").write_text("\n".join(lines) + "\n")
        log(f"apt-get update ({', '.join(f'{s}/{c}' for s, c in sorted(self.entries))})")
        out = self.run(["update"])
        failed = [ln for ln in out.splitlines() if ln.startswith(("Err:", "W: Failed to fetch", "E:"))]
        if failed:  # apt-get update can exit 0 with an index it could not fetch
            raise ProvisionError(f"apt-get update could not fetch from {self.mirror}: {failed[0][:200]}")

    def versions(self, package: str) -> list[tuple[str, str]]:
        """(version, source line) pairs from ``apt-cache madison``."""
        cmd = ["apt-cache", *self._opts(), "madison", package]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
        rows = [[f.strip() for f in ln.split("|")] for ln in out.splitlines() if ln.count("|") >= 2]
        return [(r[1], r[2]) for r in rows]

    def download(self, specs: list[str], into: Path) -> list[Path]:
        before = set(into.glob("*.deb"))
        self.run(["download", *specs], cwd=into)
        return sorted(set(into.glob("*.deb")) - before)


def pick_version(apt: Apt, package: str, release: Release) -> str:
    """The newest version of ``package`` in ``release.suite`` that belongs to the release."""
    for version, source in apt.versions(package):
        fields = source.split()  # "<uri> <suite>/<component> <arch> Packages"
        suite = fields[1].split("/")[0] if len(fields) > 1 else ""
        if suite == release.suite and version.startswith(release.key + "."):
            return version
    raise ProvisionError(f"Debian's {release.suite}/non-free has no {package} {release.key}.x "
                         f"(the archive may have moved on; see docs/NSYS-RECORDING.md)")


def fetch_libssh(apt: Apt, into: Path) -> Path:
    """``libssh-4`` for this host: from the system's apt lists if present, else from bookworm main."""
    have = list(into.glob("libssh-4_*.deb"))
    if have:
        return have[0]
    proc = subprocess.run(["apt-get", "-q", "download", LIBSSH], cwd=into, capture_output=True, text=True,
                          timeout=600)
    found = list(into.glob("libssh-4_*.deb"))
    if proc.returncode == 0 and found:
        return found[0]
    apt.need(("bookworm", "main"))
    return apt.download([f"{LIBSSH}/bookworm"], into)[0]


def unpack(debs: list[Path], root: Path) -> None:
    for deb in debs:
        try:
            subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True, capture_output=True, timeout=900)
        except FileNotFoundError:
            raise ProvisionError("dpkg not found: this script needs a Debian-based system") from None
        except subprocess.CalledProcessError as exc:
            raise ProvisionError(f"dpkg -x {deb.name} failed: {exc.stderr.decode(errors='replace').strip()[-200:]}") from None


def fix_libssh_link(root: Path) -> None:
    """Make ``host-linux-x64/libssh.so`` resolve inside ``root`` (the package's link is relative)."""
    link = root / "usr/lib/nsight-systems/host-linux-x64/libssh.so"
    target = root / LIB_REL / "libssh.so.4"
    if not target.exists():
        raise ProvisionError(f"libssh.so.4 missing in {root / LIB_REL} after unpacking libssh-4")
    if link.is_symlink() or link.exists():
        if link.exists():  # resolves now
            return
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def nsys_version(nsys: Path) -> str:
    """``2022.4.2.1`` from ``nsys --version``."""
    try:
        proc = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"{nsys} --version did not run: {exc}") from None
    m = re.search(r"(\d{4}\.\d+\.\d+(?:\.\d+)?)", proc.stdout + proc.stderr)
    if proc.returncode != 0 or not m:
        raise ProvisionError(f"{nsys} --version failed (exit {proc.returncode}): {(proc.stdout + proc.stderr).strip()[:200]}")
    return m.group(1)


def check_importer(importer: Path, lib_dir: Path) -> None:
    """Run ``QdstrmImporter --help``: it fails at load time when a library is missing."""
    env = dict(os.environ, LD_LIBRARY_PATH=f"{lib_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":"))
    try:
        proc = subprocess.run([str(importer), "--help"], capture_output=True, text=True, timeout=60, env=env,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"QdstrmImporter did not run: {exc}") from None
    text = proc.stdout + proc.stderr
    if "error while loading shared libraries" in text or (proc.returncode != 0 and "usage" not in text.lower()):
        raise ProvisionError(f"QdstrmImporter does not start: {text.strip().splitlines()[-1][:200] if text.strip() else proc.returncode}")


def provision(release: Release, dest: Path, apt: Apt, downloads: Path) -> dict:
    """Download, unpack and verify one release into ``dest/<key>``; returns the marker's content."""
    t0 = time.monotonic()
    apt.need((release.suite, "non-free"))
    version = pick_version(apt, "nsight-systems-target", release)
    specs = [f"nsight-systems-target={version}", f"nsight-systems={version}"]
    specs += [f"{p}/{release.suite}" for p in release.extra]
    log(f"{release.key}: downloading {version} ({', '.join(s.split('=')[0].split('/')[0] for s in specs)})")
    debs = apt.download(specs, downloads) + [fetch_libssh(apt, downloads)]
    t_download = time.monotonic() - t0
    final = dest / release.key
    partial = Path(tempfile.mkdtemp(prefix=f".{release.key}.", dir=dest))
    try:
        log(f"{release.key}: unpacking {len(debs)} packages")
        unpack(debs, partial)
        fix_libssh_link(partial)
        for deb in debs:
            if not deb.name.startswith("libssh-4_"):
                deb.unlink()
        nsys, importer, lib_dir = partial / NSYS_REL, partial / IMPORTER_REL, partial / LIB_REL
        if not nsys.is_file() or not importer.is_file():
            raise ProvisionError(f"{release.key}: package layout changed (no {NSYS_REL} or {IMPORTER_REL})")
        found = nsys_version(nsys)
        check_importer(importer, lib_dir)
        if final.exists():
            shutil.rmtree(final)
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    info = {
        "key": release.key, "debian_version": version, "nsys_version": found, "suite": release.suite,
        "nsys": NSYS_REL, "importer": IMPORTER_REL, "ld_library_path": [LIB_REL],
        "download_s": round(t_download, 1), "total_s": round(time.monotonic() - t0, 1),
        "provisioned_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    (final / MARKER).write_text(json.dumps(info, indent=1) + "\n")
    return info


def is_provisioned(dest: Path, key: str) -> dict | None:
    marker = dest / key / MARKER
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return info if (dest / key / info.get("nsys", NSYS_REL)).is_file() else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Fetch Debian's Nsight Systems builds into a private cache.")
    p.add_argument("--versions", default=",".join(RELEASES),
                   help=f"comma-separated releases (default: {','.join(RELEASES)})")
    p.add_argument("--dest", type=Path, default=None, help="cache folder (default: <gpuscope cache>/nsys)")
    p.add_argument("--force", action="store_true", help="unpack again even when a version is present")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    keys = [k.strip() for k in args.versions.split(",") if k.strip()]
    unknown = [k for k in keys if k not in RELEASES]
    if unknown:
        print(f"provision_nsys: error: unknown version {unknown[0]!r}; choose from {', '.join(RELEASES)}", file=sys.stderr)
        return 2
    dest = (args.dest or default_dest()).expanduser().resolve()
    try:
        dest.mkdir(parents=True, exist_ok=True)
        with open(dest / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two CI jobs provisioning at once wait for each other
            return _provision_all(keys, dest, args.force)
    except ProvisionError as exc:
        print(f"provision_nsys: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"provision_nsys: error: {exc.strerror or exc}: {exc.filename or dest}", file=sys.stderr)
        return 1


def _provision_all(keys: list[str], dest: Path, force: bool) -> int:
    t0 = time.monotonic()
    apt: Apt | None = None
    downloads = dest / ".apt" / "debs"
    todo = [k for k in keys if force or not is_provisioned(dest, k)]
    failed: list[str] = []
    for key in keys:
        info = None if key in todo else is_provisioned(dest, key)
        if info:
            log(f"{key}: already present (nsys {info['nsys_version']}) in {dest / key}")
            continue
        if apt is None:
            downloads.mkdir(parents=True, exist_ok=True)
            apt = Apt(dest / ".apt", debian_mirror())
            apt.need(*{(RELEASES[k].suite, "non-free") for k in todo})
        try:
            info = provision(RELEASES[key], dest, apt, downloads)
        except ProvisionError as exc:  # go on with the other versions; fail at the end
            failed.append(key)
            print(f"provision_nsys: error: {key}: {exc}", file=sys.stderr, flush=True)
            continue
        log(f"{key}: ok, nsys {info['nsys_version']} in {dest / key} "
            f"(download {info['download_s']} s, total {info['total_s']} s)")
    if apt is not None:
        shutil.rmtree(downloads, ignore_errors=True)
    log(f"done in {time.monotonic() - t0:.1f} s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
