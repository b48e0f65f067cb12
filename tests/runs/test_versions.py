"""The versions recorded with a run: platform's answers, computed once per interpreter, kernel and C
library and then read from the data folder (runs/versions.py)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

from gpuscope.runs import versions as run_versions

PROBE = ("import json\n"
         "from gpuscope.runs.versions import platform_facts\n"
         "print(json.dumps(platform_facts()))\n")


def test_the_facts_are_platforms_and_the_second_run_reads_them(run_env, gpuscope_home):
    first = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=run_env)
    assert first.returncode == 0, first.stderr
    facts = json.loads(first.stdout)
    assert facts == {"python": platform.python_version(), "platform": platform.platform(), "host": platform.node()}
    cache = gpuscope_home / run_versions.CACHE
    saved = json.loads(cache.read_text())
    cache.write_text(json.dumps({**saved, "platform": "as saved"}))   # the second run takes what was saved
    second = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=run_env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == {**facts, "platform": "as saved"}


def test_a_copy_made_elsewhere_is_not_used(gpuscope_home):
    (gpuscope_home / run_versions.CACHE).write_text(json.dumps(
        {"key": ["/other/python", sys.version, ["Linux"], None], "python": "0.0", "platform": "x", "host": "y"}))
    assert run_versions.platform_facts()["platform"] == platform.platform()
    saved = json.loads((gpuscope_home / run_versions.CACHE).read_text())
    assert saved["key"] == run_versions._key() and saved["platform"] == platform.platform()
    (gpuscope_home / run_versions.CACHE).write_text("not json")
    assert run_versions.platform_facts()["python"] == platform.python_version()
