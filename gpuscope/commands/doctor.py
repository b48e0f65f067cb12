"""``gpuscope doctor``: is this machine ready to record? nsys, its importer, nvtx under nsys, NVML.

Each check prints one line with ✓ or ✗ and, on ✗, what to do. The exit code is 1 when an
essential check fails (no nsys found, or NVTX from Python does not record under it), else 0:
a missing GPU/driver or importer is reported but is not fatal, CPU-side profiling still works.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass

from gpuscope.errors import UserError

DESCRIPTION = ("Check which Nsight Systems builds are installed, whether their importer runs, whether the "
               "nvtx package records under them (a real one-line profile), and whether NVML sees a GPU. "
               "Exit code 1 when an essential check fails.")


@dataclass
class Check:
    """One line of the doctor's output."""

    name: str
    ok: bool
    detail: str
    advice: str = ""
    essential: bool = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--python", default=sys.executable, help="interpreter whose nvtx to check (default: this one)")
    p.add_argument("--nsys", metavar="VERSION", default=None, help="check this nsys version (e.g. 2022.4)")
    p.add_argument("--all", action="store_true", help="probe every nsys found, not only the one runs use")
    p.add_argument("--no-probe", action="store_true", help="skip the test recording (fast)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for one test recording (default 60)")


def run(args: argparse.Namespace) -> int:
    checks = collect(args)
    failed = [c for c in checks if c.essential and not c.ok]
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=1))
    else:
        for c in checks:
            print(f"{'✓' if c.ok else '✗'} {c.name}: {c.detail}")
            if not c.ok and c.advice:
                print(f"    → {c.advice}")
        print("doctor: " + ("all essential checks passed" if not failed
                            else f"{len(failed)} essential check(s) failed"))
    return 1 if failed else 0


def collect(args: argparse.Namespace) -> list[Check]:
    """All checks, in display order."""
    from gpuscope.nsys import locate

    checks = [check_python(), check_nvtx(args.python)]
    try:
        installs = locate.list_installs()
        chosen = locate.find_nsys(args.nsys)
    except UserError as exc:
        installs, chosen = [], None
        checks.append(Check("nsys", False, str(exc), "run scripts/provision_nsys.py or set GPUSCOPE_NSYS",
                            essential=True))
    for inst in installs:
        mark = " (used for runs)" if chosen and inst.nsys == chosen.nsys else ""
        checks.append(Check("nsys", True, f"{inst.version} at {inst.nsys} [{inst.source}]{mark}"))
    targets = installs if args.all else [chosen] if chosen else []
    for inst in targets:
        checks.append(check_importer(inst))
        if not args.no_probe:
            checks.append(check_recording(inst, args.python, args.timeout))
    checks.append(check_nvml())
    checks.append(check_qt_platform())
    checks.append(check_store())
    return checks


def check_qt_platform() -> Check:
    """Whether the desktop app's Qt platform plugin can load (the CLI works either way)."""
    from gpuscope.app import qtcheck

    if not qtcheck.xcb_wanted():
        return Check("desktop app", True, f"Qt platform {os.environ.get('QT_QPA_PLATFORM')!r} (xcb not used)")
    plugin = qtcheck.xcb_plugin()
    if plugin is None:
        return Check("desktop app", False, "PySide6 (or its xcb plugin) is not installed",
                     "pip install 'PySide6-Essentials<6.12'")
    missing = qtcheck.missing_libraries(plugin)
    if missing:
        return Check("desktop app", False, qtcheck.xcb_detail(missing), qtcheck.xcb_advice(missing))
    return Check("desktop app", True, f"Qt's xcb plugin has all its libraries ({plugin.name})")


def check_store() -> Check:
    """The run store reads as a healthy SQLite file, and the data folder is private."""
    from gpuscope import paths
    from gpuscope.store import recovery

    store = paths.store_path()
    problem = recovery.check(store)
    if problem is not None:
        return Check("store", False, f"{store} is damaged: {problem}",
                     "run `gpuscope history`: it moves the file aside and rebuilds the store from the run folders")
    mode = stat.S_IMODE(paths.data_dir().stat().st_mode)
    if mode & 0o077:
        return Check("store", False, f"{paths.data_dir()} is readable by others ({oct(mode)})",
                     f"chmod -R go-rwx {paths.data_dir()}")
    size = store.stat().st_size if store.exists() else 0
    return Check("store", True, f"{store} reads whole ({size // 1024} KiB), data folder private")


def check_python() -> Check:
    from gpuscope import __version__

    return Check("python", True, f"Python {platform.python_version()} ({sys.executable}), gpuscope {__version__}")


def check_nvtx(python: str) -> Check:
    from gpuscope.nsys.record import nvtx_version

    version = nvtx_version(python)
    if version is None:
        return Check("nvtx", False, f"the nvtx package is not importable by {python}",
                     f"{python} -m pip install 'nvtx<=0.2.11'", essential=True)
    return Check("nvtx", True, f"nvtx {version} ({python})")


def check_importer(inst) -> Check:
    name = f"importer {inst.release}"
    if inst.importer is None:
        return Check(name, False, f"no QdstrmImporter beside {inst.nsys}",
                     "fine if this nsys writes .nsys-rep itself (NVIDIA's installers); otherwise reinstall it "
                     "or run scripts/provision_nsys.py")
    try:
        proc = subprocess.run([str(inst.importer), "--version"], capture_output=True, text=True, timeout=30,
                              env=inst.tool_env(), stdin=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, f"QdstrmImporter did not run: {exc}", "run scripts/provision_nsys.py --force")
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "error while loading" in text:
        last = text.splitlines()[-1][:200] if text else f"exit {proc.returncode}"
        return Check(name, False, f"QdstrmImporter fails: {last}",
                     "install the missing library (libssh-4; libarrow500/libparquet500 for 2024.2) "
                     "or run scripts/provision_nsys.py --force")
    return Check(name, True, f"QdstrmImporter runs ({inst.importer})")


def check_recording(inst, python: str, timeout_s: float) -> Check:
    from gpuscope.nsys.diagnostics import nvtx_pair_note
    from gpuscope.nsys.probe import probe
    from gpuscope.nsys.record import nvtx_version

    name = f"record {inst.release}"
    res = probe(inst, python, timeout_s=timeout_s)
    steps = ", ".join(f"{n} {s:.1f} s" for n, s in res.steps)
    retried = "; nsys hung once and was retried" if res.attempts > 1 else ""
    if res.ok:
        return Check(name, True, f"NVTX from Python records under nsys {inst.version}: {res.detail} "
                                 f"({steps}{retried})", essential=True)
    advice = "; ".join(f.advice for f in res.findings[:1]) or \
        (nvtx_pair_note(nvtx_version(python), inst.version_tuple) or "see docs/NSYS-RECORDING.md")
    problem = res.findings[0].message if res.findings else res.detail
    return Check(name, False, f"NVTX does not record under nsys {inst.version}: {problem}{retried}", advice,
                 essential=True)


def check_nvml() -> Check:
    try:
        import pynvml
    except ImportError:
        return Check("nvml", False, "nvidia-ml-py (pynvml) is not installed", "pip install nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError and friends: every failure means "no GPU here"
        return Check("nvml", False, f"no NVIDIA GPU / driver (NVML: {exc})",
                     "GPU telemetry and CUDA traces need the NVIDIA driver; NVTX and CPU profiling work without")
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        names = []
        for i in range(count):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else name)
    finally:
        pynvml.nvmlShutdown()
    driver = driver.decode() if isinstance(driver, bytes) else driver
    return Check("nvml", True, f"driver {driver}, {count} GPU(s)" + (f": {', '.join(names)}" if names else ""))
