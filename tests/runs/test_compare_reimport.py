"""`gpuscope compare --start-methods fork,spawn` on a spawn-heavy script (its `__main__` imports numpy
and a module that sleeps 0.3 s at import): the verdict accounts for the difference by its parts and
names the re-import of `__main__` with its time; `main_reimport_ms` is among the metrics."""

from __future__ import annotations

import json
import os
import re

from gpuscope.analysis.verdict import fmt
from tests.runs.helpers import gpuscope, script

SLEEP_AT_IMPORT_MS = 300   # tests/runs/scripts/slow_settings.py sleeps this long when imported


def test_verdict_names_the_reimport_and_its_time(run_env, gpuscope_home):
    proc = gpuscope("compare", "--start-methods", "fork,spawn", "--repeat", "2", "--json", "--quiet",
                    script("compare_reimport.py"), env=run_env, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    data = json.loads(proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    metrics = {m["name"]: m["values"] for m in data["metrics"]}
    parts = {m["name"]: m["values"] for m in data["breakdown"]}

    # each spawn worker re-imports the script: the module's sleep alone is a floor; fork re-imports nothing
    reimport = metrics["main_reimport_ms"]
    assert reimport["spawn"]["min"] >= SLEEP_AT_IMPORT_MS, reimport
    assert reimport["fork"]["median"] < reimport["spawn"]["median"], reimport
    assert parts["main_reimport"]["spawn"]["min"] >= SLEEP_AT_IMPORT_MS, parts["main_reimport"]

    # the parts are consecutive: with two runs each their medians add up to the wall time's median
    for label in ("fork", "spawn"):
        total = sum(v[label]["median"] for v in parts.values())
        assert abs(total - 1000 * metrics["wall_s"][label]["median"]) < 1, (label, total, metrics["wall_s"])

    verdict = data["verdict"]
    assert verdict.startswith("Spawn is "), verdict
    diff = parts["main_reimport"]["spawn"]["median"] - parts["main_reimport"]["fork"]["median"]
    clause = (f"re-importing __main__ in the worker +{fmt(diff, 'ms')} (")
    assert clause in verdict, verdict
    assert f"{fmt(parts['main_reimport']['spawn']['median'], 'ms')} under spawn" in verdict, verdict
    assert re.search(r"(not accounted for [+−]|nothing left unaccounted for)", verdict), verdict
    # and what the re-import imported, timed by the hook in the worker (numpy or the slow module first)
    modules = dict(data["reimport_modules"]["spawn"])
    assert modules["slow_settings"] >= SLEEP_AT_IMPORT_MS and "numpy" in modules, modules
    named = re.search(r"its slowest imports: ([^)]*)\)", verdict)
    assert named and f"slow_settings {fmt(modules['slow_settings'], 'ms')}" in named.group(1), verdict
    assert data["reimport_modules"]["fork"] == [], data["reimport_modules"]

    # the series is recorded for History as one entry
    (entry,) = [json.loads((gpuscope_home / "series" / name).read_text())
                for name in os.listdir(gpuscope_home / "series") if name.endswith(".json")]
    assert entry["runs"] == data["runs"] and entry["methods"] == ["fork", "spawn"]
