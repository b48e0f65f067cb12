"""``gpuscope report --redact``: a real nsys export without the program's environment (issue 15.10)."""

from __future__ import annotations

import subprocess
import sys





def test_a_nsys_rep_alone_is_refused_with_one_line(tmp_path, run_env):
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"\0" * 64)
    res = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--redact", str(tmp_path / "o.sqlite"),
                          str(rep)], env=run_env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "cannot be redacted" in res.stderr and len(res.stderr.splitlines()) == 1
