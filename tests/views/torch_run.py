"""One real ``gpuscope run --launcher torchrun --nproc 2 --torch-profile --torch-profile-shapes`` of a
gloo DDP loop with NVTX step ranges (scripts/ddp_nvtx_steps.py), made once per test session and
worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_nvtx_steps.py"
SCHEDULE = "0,1,3"      # no wait, one warm-up step, three recorded steps (a step: one optimizer.step())
RECORDED_STEPS = 3


def torch_run(tmp_path_factory) -> Path:
    """The run folder (its report has both ranks' traces and NVTX step ranges)."""
    base = tmp_path_factory.getbasetemp() / "torchview-run"
    record = base / "run.json"
    if record.exists():
        return Path(json.loads(record.read_text())["run_dir"])
    base.mkdir(exist_ok=True)
    env = dict(os.environ, GPUSCOPE_HOME=str(base / "home"))
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-m", "gpuscope", "run", "-q", "--json", "--launcher", "torchrun",
                           "--nproc", "2", "--torch-profile", "--torch-profile-schedule", SCHEDULE,
                           "--torch-profile-shapes", str(SCRIPT)],
                          env=env, capture_output=True, text=True, timeout=280, cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert len(got.get("torch_traces") or []) == 2, got.get("torch_traces")
    record.write_text(json.dumps(got))
    return Path(got["run_dir"])
