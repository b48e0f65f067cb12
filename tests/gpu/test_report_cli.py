"""``gpuscope report EXPORT [--json]`` shows who ran when on each GPU (SYNTHETIC exports)."""

from __future__ import annotations

import json
import os
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




def test_report_of_a_run_names_the_processes_roles(tmp_path):
    """A real run's folder holding an export with kernels of the run's own main process."""
    from tests.gpu import synthetic_export as sx
    from tests.gpu.test_gpu_rules import _gpuscope
    from tests.gpu.test_sharing import US

    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home")}
    script = tmp_path / "tiny.py"
    script.write_text("print('tiny')\n")
    proc = _gpuscope("run", "--json", "--quiet", str(script), env=env)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    main = next(p["pid"] for p in summary["processes"] if p["role"] == "main")
    ex = sx.Export(kernels=[sx.Kernel(main, 0, 0, 10 * US), sx.Kernel(4242, 0, 12 * US, 20 * US)])
    sx.write(os.path.join(summary["run_dir"], "report.sqlite"), ex, "2024.2")
    proc = _gpuscope("report", summary["run_id"], "--json", "--no-cache", env=env)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["gpu_sharing"]
    roles = {p["pid"]: (p["role"], p["rank"]) for p in got[0]["processes"]}
    assert roles == {main: ("main", None), 4242: ("unknown", None)}   # coverage: a process only nsys saw
