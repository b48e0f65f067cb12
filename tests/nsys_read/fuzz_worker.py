"""Seeded damage of real inputs, opened the way the CLI and the app open them (the fuzz tests' child).

``python fuzz_worker.py KIND SOURCE WORKDIR SEED COUNT``: KIND ``export`` (an nsys .sqlite
export), ``run`` (a gpuscope run folder) or ``job`` (a job folder of node runs). For each case: one
seeded mutation of a copy of SOURCE, then ``load_report`` (no cache), the ``--json`` object, the
Timeline and the run record where there is one. One line per case on stdout, written *before* the
case runs (``start N what``) and after it (``ok N`` / ``refused N`` / ``internal N <exception
type>: <text>``), so the parent can tell a hang (a start line without its end) from a crash.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import traceback
from pathlib import Path

PAGE = 4096


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One damage of a file's bytes: flips, a zeroed page, a cut, a garbled header, a page of noise."""
    kind = rng.choice(["flip1", "flip8", "flip64", "zero-page", "truncate", "header", "noise-page"])
    if not data:
        return rng.randbytes(rng.randrange(1, 64)), "noise"
    b = bytearray(data)
    if kind.startswith("flip"):
        for _ in range(int(kind[4:])):
            pos = rng.randrange(len(b))
            b[pos] ^= 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
    elif kind in ("zero-page", "noise-page") and len(b) > PAGE:
        page = rng.randrange(len(b) // PAGE)
        fill = bytes(PAGE) if kind == "zero-page" else rng.randbytes(PAGE)
        b[page * PAGE:(page + 1) * PAGE] = fill[:len(b) - page * PAGE]
    elif kind == "truncate":
        b = b[:rng.randrange(len(b))]
    else:   # the first 100 bytes (SQLite's header, a JSON object's keys, a log's header line)
        for _ in range(rng.choice([1, 3, 10])):
            pos = rng.randrange(min(100, len(b)) or 1)
            if pos < len(b):
                b[pos] = rng.randrange(256)
    return bytes(b), kind


def _open(path: Path, run: bool) -> None:
    """What `gpuscope report --json` and the app do with it."""
    from gpuscope.commands.report import to_json
    from gpuscope.nsys.report import load_report

    rep = load_report(path, use_cache=False)
    json.dumps(to_json(rep))
    rep.timeline   # noqa: B018 - the full read the app does after its tables
    if run:
        from gpuscope.store.lookup import open_run

        open_run(path)


def main(kind: str, source: str, work: str, seed: int, count: int) -> int:
    from gpuscope.errors import UserError

    src, root = Path(source), Path(work)
    rng = random.Random(seed)
    files = sorted(p for p in src.rglob("*") if p.is_file()) if kind != "export" else [src]
    for case in range(count):
        target = root / f"case{case % 2}"
        shutil.rmtree(target, ignore_errors=True)
        if kind != "export":
            shutil.copytree(src, target)
            victim = rng.choice(files)
            where = target / victim.relative_to(src)
            opened = target
        else:
            target.mkdir(parents=True)
            where = opened = target / src.name
            victim = src
        data, how = mutate(victim.read_bytes(), rng)
        where.write_bytes(data)
        os.environ.pop("GPUSCOPE_NO_COMPILED", None)
        if rng.random() < 0.3:   # the sqlite3 read path too, not only the page decoder
            os.environ["GPUSCOPE_NO_COMPILED"] = "1"
        print(f"start {case} {how} {victim.name}", flush=True)
        try:
            _open(opened, kind == "run")
            print(f"ok {case}", flush=True)
        except UserError as exc:
            text = str(exc)
            print(f"refused {case} {text}" if "\n" not in text else f"internal {case} multi-line: {text!r}",
                  flush=True)
        except Exception as exc:   # noqa: BLE001 - what the fuzz looks for
            where = " < ".join(f"{Path(f.filename).name}:{f.lineno}"
                               for f in reversed(traceback.extract_tb(exc.__traceback__)[-4:]))
            print(f"internal {case} {type(exc).__name__}: {str(exc)[:200]!r} at {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
