"""The Ray object store of a run, from Ray's own state API (docs/RAY.md).

A run that starts a local Ray cluster gets a probe: ``ray_probe.py`` run with the *driver's*
interpreter (the one that has Ray; gpuscope's own environment may not), not injected, asking the
cluster's GCS once a second for the object store figures of the node (memory used, capacity,
spilled and restored bytes, objects). Each answer is a line of ``ray_store.jsonl`` in the run
folder (``t_ns`` on the event logs' clock). ``read_ray_store`` reads it back; ``summarize`` gives
the figures the run's notes and findings use.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

from gpuscope.rundir import RAY_STORE

if TYPE_CHECKING:
    import subprocess

PROBE = os.path.join(os.path.dirname(__file__), "ray_probe.py")
# the figures of one sample (bytes unless *_objects); see ray_probe.STATS
FIELDS = ("used", "capacity", "primary_bytes", "pinned_objects", "local_objects", "fallback_bytes",
          "spilled_bytes", "spilled_objects", "restored_bytes", "created_bytes")


def probe_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """gpuscope's environment without its injection: the probe is not part of the program."""
    env = dict(os.environ if env is None else env)
    for key in [k for k in env if k.startswith("GPUSCOPE_")]:
        del env[key]
    if env.get("PYTHONPATH"):
        parts = [p for p in env["PYTHONPATH"].split(os.pathsep) if p and not p.rstrip("/").endswith("inject/boot")]
        env["PYTHONPATH"] = os.pathsep.join(parts)
        if not parts:
            del env["PYTHONPATH"]
    return env


class RayStoreProbe:
    """The probe process of one run and the thread that writes its lines to ``ray_store.jsonl``."""

    def __init__(self, run_dir: str | os.PathLike[str], address: str, executable: str,
                 interval_s: float = 1.0, ray_env: dict[str, str] | None = None) -> None:
        self.path = os.path.join(run_dir, RAY_STORE)
        self.address = address
        self.executable = executable
        self.interval_s = interval_s
        self.ray_env = dict(ray_env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.samples = 0
        self.errors: list[str] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import subprocess   # here: the module is loaded for its readers too; only a Ray run starts a probe

        self.proc = subprocess.Popen([self.executable, PROBE, self.address, str(self.interval_s)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env={**probe_env(), **self.ray_env},
                                     close_fds=True)
        self._thread = threading.Thread(target=self._pump, name="gpuscope-ray-store", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.path, "ab") as out:
            for raw in self.proc.stdout:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if "error" in line:
                    if line["error"] not in self.errors:
                        self.errors.append(str(line["error"]))
                    continue
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
                out.flush()
                self.samples += 1

    def stop(self, timeout_s: float = 3.0) -> None:
        """End the probe (it also ends by itself when the cluster is gone or gpuscope ends)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            import subprocess

            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if proc.stdout is not None:
            proc.stdout.close()


def read_ray_store(run_dir: str | os.PathLike[str]) -> list[dict[str, int]]:
    """The samples of a run's ``ray_store.jsonl`` in time order ([] without one)."""
    try:
        with open(os.path.join(run_dir, RAY_STORE), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return []
    return _parse(text)


class StoreTail:
    """The samples added to a run's ``ray_store.jsonl`` since the last call (complete lines only),
    for the live plots."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(run_dir, RAY_STORE)
        self.offset = 0

    def read_new(self) -> list[dict[str, int]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return _parse(data[:end].decode("utf-8", "replace"))


def _parse(text: str) -> list[dict[str, int]]:
    out = []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and "t_ns" in line:
            out.append({k: int(line.get(k) or 0) for k in ("t_ns", *FIELDS)})
    out.sort(key=lambda s: s["t_ns"])
    return out


def summarize(samples: list[dict[str, int]]) -> dict[str, Any] | None:
    """Peak and last figures of a run's object store, or None without samples."""
    if not samples:
        return None
    last = samples[-1]
    return {
        "samples": len(samples), "capacity": max(s["capacity"] for s in samples),
        "peak_used": max(s["used"] for s in samples), "last_used": last["used"],
        "peak_objects": max(s["local_objects"] for s in samples),
        "spilled_bytes": max(s["spilled_bytes"] for s in samples),
        "spilled_objects": max(s["spilled_objects"] for s in samples),
        "restored_bytes": max(s["restored_bytes"] for s in samples),
        "duration_s": round((last["t_ns"] - samples[0]["t_ns"]) / 1e9, 3),
    }


def mib(value: int) -> str:
    return f"{value / 2**20:.0f} MiB"
