"""The versions recorded with a run: platform's answers, computed once per interpreter, kernel and C
library and then read from the data folder (runs/versions.py, issue 14.4)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

from gpuscope.runs import versions as run_versions

PROBE = ("import json, sys\n"
         "from gpuscope.runs.versions import platform_facts\n"
         "facts = platform_facts()\n"
         "print(json.dumps([facts, 'platform' in sys.modules]))\n")


def test_the_facts_are_platforms_and_the_second_run_reads_them(run_env, gpuscope_home):
    first = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=run_env)
    second = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=run_env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    facts, imported = json.loads(first.stdout)
    assert facts == {"python": platform.python_version(), "platform": platform.platform(), "host": platform.node()}
    assert imported
    assert json.loads(second.stdout) == [facts, False]     # read back: no platform, no `uname -p`


def test_a_copy_made_elsewhere_is_not_used(gpuscope_home):
    (gpuscope_home / run_versions.CACHE).write_text(json.dumps(
        {"key": ["/other/python", sys.version, ["Linux"], None], "python": "0.0", "platform": "x", "host": "y"}))
    assert run_versions.platform_facts()["platform"] == platform.platform()
    saved = json.loads((gpuscope_home / run_versions.CACHE).read_text())
    assert saved["key"] == run_versions._key() and saved["platform"] == platform.platform()
    (gpuscope_home / run_versions.CACHE).write_text("not json")
    assert run_versions.platform_facts()["python"] == platform.python_version()
