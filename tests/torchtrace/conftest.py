"""One real 2-rank gloo DDP job, profiled by torch.profiler inside the script, for every test here
(ddp_job.py: cycle0 balanced, cycle1 rank 1 slow, cycle2 slow DataLoader)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ddp_cycles(tmp_path_factory) -> Path:
    """The job's output folder: cycle0/, cycle1/, cycle2/, each a gzip trace and torch's own
    key_averages per rank."""
    out = tmp_path_factory.mktemp("ddp")
    done = subprocess.run([sys.executable, str(HERE / "ddp_job.py"), str(out), "--gz", "--port", str(_free_port())],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def make_run(tmp: Path, cycle: Path, name: str = "run") -> Path:
    """A run folder whose torch/ holds the traces of one cycle (as gpuscope run puts them)."""
    run = tmp / name
    (run / "torch").mkdir(parents=True)
    for p in cycle.glob("*.pt.trace.json*"):
        shutil.copy(p, run / "torch" / p.name)
    return run
