"""Every wrapper gpuscope installs pickles like the original: by reference (pickle) and by value
(cloudpickle, as Ray and joblib/loky send ``__main__``'s functions), loadable in a process without
gpuscope, and still recorded in a process with it (issue 13)."""

from __future__ import annotations

import subprocess
import sys

from tests.runs.helpers import gpuscope, script, summary


def test_wrappers_pickle_like_the_originals(run_env):
    plain = subprocess.run([sys.executable, script("pickle_wrappers.py")], capture_output=True, env=run_env,
                           timeout=240)
    assert plain.returncode == 0, plain.stderr.decode()[-2000:]
    proc = gpuscope("run", "--json", "--annotate", "__main__:by_flag", script("pickle_wrappers.py"),
                    env=run_env, timeout=300)
    result = summary(proc)
    program_out = proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[0] + b"\n"
    assert program_out == plain.stdout, (plain.stdout.decode(), proc.stdout.decode(), proc.stderr.decode()[-3000:])
    assert b"FAILED" not in plain.stdout and b"fresh: Acc.add 5" in plain.stdout
    assert result["exit_code"] == 0
    # the functions sent by value to joblib's loky workers were rebuilt as gpuscope's annotate there
    # and recorded: their NVTX ranges (and the --annotate'd one) are in the workers' rows
    workers = [p for p in result["processes"] if p["role"] == "loky worker"]
    assert workers, [p["role"] for p in result["processes"]]
    names = {n for p in workers for n in p["range_names"]}
    assert {"scaled", "plus_one", "acc:Acc.add"} <= names, names
    assert any("by_flag" in n for n in names), names
