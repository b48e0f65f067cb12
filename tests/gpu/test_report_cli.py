"""``gpuscope report EXPORT [--json]`` shows who ran when on each GPU (SYNTHETIC exports)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.gpu.test_sharing import sliced


def _report(path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuscope", "report", str(path), *args],
                          capture_output=True, text=True, timeout=120)


def test_report_json_has_gpu_sharing_per_device(tmp_path):
    proc = _report(sliced("2022.4", tmp_path), "--json", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["gpu_sharing"]
    assert [(d["device"], d["busy_s"], d["concurrent_s"], d["switches"]) for d in got] == [
        (0, 50e-6, 0.0, 4), (1, 40e-6, 0.0, 0)]
    assert set(got[0]["processes"][0]) >= {"pid", "rank", "role", "gpu_s", "share", "queued_s"}
    text = _report(sliced("2022.4", tmp_path), "--no-cache").stdout
    assert "GPU sharing" in text and "GPU 0: busy 0.050" in text and "4 switch(es)" in text

