"""Per-process injection cost at interpreter start, with and without gpuscope, in one run.

Two measures, alternated round by round (median and spread over the rounds):

* ``python -c pass``: wall time of a whole interpreter start, plain and with gpuscope's hook
  (``PYTHONPATH`` = the boot folder and the ``GPUSCOPE_*`` variables a run's processes get), and
  the hook's own share from ``-X importtime`` (the cumulative time of ``sitecustomize``), as the
  process itself recorded it (``hook_ns`` in its event log), and net: ``site``'s cumulative time
  with the hook minus without (the hook's line includes its search for the next
  ``sitecustomize`` on sys.path, which a plain start makes too, in ``site``'s own line);
* spawn child start-up: ``Process(target=noop).start(); join()`` under spawn, timed inside a
  parent that runs plain or injected.

PYTHONDONTWRITEBYTECODE is honoured as set in the environment (run it both ways).

    .venv/bin/python benchmarks/bench_startup.py [--python PY] [--rounds N] [--boot BOOT]
    .venv/bin/python benchmarks/bench_startup.py --compare-boot OLD/gpuscope/inject/boot [--spawn] [--python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOT = ROOT / "gpuscope" / "inject" / "boot"
SPAWN = ("import multiprocessing as mp, time\n"
         "def noop(): pass\n"
         "if __name__ == '__main__':\n"
         "    ctx = mp.get_context('spawn'); t = time.perf_counter()\n"
         "    for _ in range(3):\n"
         "        p = ctx.Process(target=noop); p.start(); p.join()\n"
         "    print((time.perf_counter() - t) / 3)\n")


def _env(injected: bool, run_dir: str, boot: Path = BOOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_") and k != "PYTHONPATH"}
    if injected:   # what gpuscope.runs.launcher gives a run's processes
        env.update(PYTHONPATH=str(boot), GPUSCOPE_RUN_DIR=run_dir, GPUSCOPE_RUN_ID="bench",
                   GPUSCOPE_SCRIPT=os.path.join(run_dir, "spawn_bench.py"), GPUSCOPE_START_METHOD="default")
    return env


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _start(python: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one ``python -c pass``: CPU time is less at the mercy of a busy machine."""
    t, c = time.perf_counter(), _children_cpu()
    subprocess.run([python, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - t, _children_cpu() - c


def _importtime(python: str, env: dict[str, str]) -> dict[str, float]:
    """Cumulative seconds of ``site`` and (if found) ``sitecustomize`` in ``-X importtime``'s lines."""
    err = subprocess.run([python, "-X", "importtime", "-c", "pass"], env=env, capture_output=True,
                         text=True, check=True).stderr
    out = {}
    for line in err.splitlines():   # "import time: self | cumulative |   sitecustomize" (under site)
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() in ("site", "sitecustomize"):
            out[parts[2].strip()] = int(parts[1]) / 1e6
    return out


def _hook_share(python: str, env: dict[str, str]) -> float:
    """The hook's line: ``sitecustomize``'s cumulative time. It includes the search for the next
    ``sitecustomize`` on sys.path (to run it too), which a plain start makes as well, inside ``site``."""
    share = _importtime(python, env).get("sitecustomize")
    if share is None:
        raise SystemExit("no sitecustomize in -X importtime's output: is the hook on PYTHONPATH?")
    return share


def _site(python: str, env: dict[str, str]) -> float:
    return _importtime(python, env)["site"]


def _recorded_share(run_dir: str) -> list[float]:
    """``hook_ns`` of every process's event log in ``run_dir`` (the hook's own measure)."""
    out = []
    for name in os.listdir(os.path.join(run_dir, "events")):
        if name.endswith(".log"):
            for line in Path(run_dir, "events", name).read_text().splitlines():
                if line.startswith("I\t") and '"hook_ns"' in line:
                    out.append(json.loads(line.split("\t", 2)[2])["hook_ns"] / 1e9)
    return out


def _spawn(python: str, env: dict[str, str], script: str) -> tuple[float, float]:
    """(a spawn child's start + join, as the parent timed it; CPU of the whole tree: the parent,
    its 3 children and multiprocessing's resource tracker, 5 interpreters)."""
    c = _children_cpu()
    out = subprocess.run([python, script], env=env, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1]), _children_cpu() - c


def _fmt(values: list[float]) -> str:
    low, high = min(values) * 1e3, max(values) * 1e3
    return f"median {statistics.median(values) * 1e3:7.2f} ms  (min {low:.2f}, max {high:.2f})"


def _compare_boots(python: str, rounds: int, new: Path, old: Path, spawn: bool) -> None:
    """The hook's ``-X importtime`` share of two boot folders (and with ``spawn`` a spawn child's
    start + join and its benchmark's CPU), alternated round by round."""
    names = ("this boot", "other boot")
    share: dict[str, list[float]] = {k: [] for k in names}
    child: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "spawn_bench.py")
        Path(script).write_text(SPAWN)
        envs = {"this boot": _env(True, tmp, new), "other boot": _env(True, tmp, old)}
        for env in envs.values():
            _start(python, env)   # fill the code caches once
        for i in range(rounds):
            for key in (names if i % 2 == 0 else names[::-1]):
                share[key].append(_hook_share(python, envs[key]))
                if spawn:
                    child[key].append(_spawn(python, envs[key], script))
    print(f"python {python}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}; "
          f"{rounds} alternated rounds; load average {os.getloadavg()[0]:.1f}; hook's -X importtime share")
    for key, values in share.items():
        print(f"  {key:<11} {_fmt(values)}")
    diff = [a - b for a, b in zip(share["this boot"], share["other boot"])]
    print(f"  this - other: {_fmt(diff)}")
    if spawn:
        print("  a spawn child's start + join (the parent's timing); CPU of its benchmark per interpreter (5):")
        for key, rows in child.items():
            print(f"  {key:<11} {_fmt([w for w, _ in rows])};  CPU {_fmt([c / 5 for _, c in rows])}")
        this, other = child["this boot"], child["other boot"]
        print(f"  this - other: {_fmt([a[0] - b[0] for a, b in zip(this, other)])};  "
              f"CPU {_fmt([(a[1] - b[1]) / 5 for a, b in zip(this, other)])}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--boot", default=str(BOOT), help="another copy's boot folder (e.g. an older commit's)")
    ap.add_argument("--compare-boot", metavar="OLD_BOOT", help="only the hook's -X importtime share, this boot "
                    "folder against OLD_BOOT, alternated in the same rounds")
    ap.add_argument("--spawn", action="store_true", help="with --compare-boot: a spawn child's start-up too")
    args = ap.parse_args()
    if args.compare_boot:
        return _compare_boots(args.python, args.rounds, Path(args.boot), Path(args.compare_boot), args.spawn)
    res: dict[str, list[float]] = {k: [] for k in ("plain", "gpuscope", "plain CPU", "gpuscope CPU",
                                                    "hook (importtime)", "site plain", "site gpuscope",
                                                    "spawn plain", "spawn gpuscope",
                                                    "spawn plain CPU", "spawn gpuscope CPU")}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "spawn_bench.py")
        Path(script).write_text(SPAWN)
        plain, injected = _env(False, tmp), _env(True, tmp, Path(args.boot))
        _start(args.python, injected)  # fill gpuscope's code cache once
        for _ in range(args.rounds):
            for key, env in (("plain", plain), ("gpuscope", injected)):
                wall, cpu = _start(args.python, env)
                res[key].append(wall)
                res[key + " CPU"].append(cpu)
            res["hook (importtime)"].append(_hook_share(args.python, injected))
            for key, env in (("site plain", plain), ("site gpuscope", injected)):
                res[key].append(_site(args.python, env))
            for key, env in (("spawn plain", plain), ("spawn gpuscope", injected)):
                wall, cpu = _spawn(args.python, env, script)
                res[key].append(wall)
                res[key + " CPU"].append(cpu)
        recorded = _recorded_share(tmp)
    print(f"python {args.python}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}; "
          f"{args.rounds} alternated rounds; load average {os.getloadavg()[0]:.1f}")
    for key, values in res.items():
        print(f"  {key:<17} {_fmt(values)}")
    if recorded:
        print(f"  hook (recorded)   {_fmt(recorded)}  ({len(recorded)} processes: its own hook_ns)")
    net = [g - p for g, p in zip(res["site gpuscope"], res["site plain"])]
    print(f"  hook, net (importtime): {_fmt(net)}  (site's cumulative time, gpuscope - plain: the "
          "search for a sitecustomize, in both, cancels out)")
    extra = [g - p for g, p in zip(res["gpuscope"], res["plain"])]
    extra_cpu = [g - p for g, p in zip(res["gpuscope CPU"], res["plain CPU"])]
    spawn_extra = [g - p for g, p in zip(res["spawn gpuscope"], res["spawn plain"])]
    print(f"  start, gpuscope - plain:       {_fmt(extra)}")
    print(f"  start CPU, gpuscope - plain:   {_fmt(extra_cpu)}")
    print(f"  spawn child, gpuscope - plain: {_fmt(spawn_extra)}")
    tree_extra = [(g - p) / 5 for g, p in zip(res["spawn gpuscope CPU"], res["spawn plain CPU"])]
    print(f"  spawn benchmark CPU, gpuscope - plain, per interpreter (5): {_fmt(tree_extra)}")


if __name__ == "__main__":
    main()
