"""Roles people recognise: DataLoader workers with their worker id, executor and loky workers (issue 10.4)."""

from __future__ import annotations

import pytest

from gpuscope.trace.process_row import ProcessRow
from tests import requires
from tests.runs.helpers import gpuscope, script, summary


def _run(run_env, *kinds: str) -> tuple[list[ProcessRow], str]:
    proc = gpuscope("run", "--json", script("worker_kinds.py"), *kinds, env=run_env, timeout=580)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return [ProcessRow.from_dict(p) for p in summary(proc)["processes"]], proc.stdout.decode()


@pytest.mark.torch
@pytest.mark.timeout(600)   # importing torch takes minutes when the shared machine is loaded
def test_dataloader_and_executor_workers(run_env):
    requires.torch()
    rows, out = _run(run_env, "dataloader", "executor")
    assert "dataloader sum 496.0" in out and "executor [0, 1, 4, 9, 16, 25]" in out
    loaders = sorted((r for r in rows if r.role == "DataLoader worker"), key=lambda r: r.worker_id)
    assert [r.worker_id for r in loaders] == [0, 1], [(r.role, r.mp_name) for r in rows]
    assert [r.name for r in loaders] == ["gs:dl0", "gs:dl1"]
    assert all(r.cpu_source == "exact" and r.exit_code == 0 for r in loaders)
    executors = [r for r in rows if r.role == "executor worker"]
    assert len(executors) == 2 and all(r.name.startswith("gs:exec") for r in executors)
    assert sum(r.ranges for r in executors) == 6          # one task range per executor task
    assert not [r for r in rows if r.role in ("process child", "pool worker")], rows


def test_loky_workers(run_env):
    pytest.importorskip("joblib")   # in the test extras: a skip fails under CI=true
    rows, out = _run(run_env, "loky")
    assert "loky [0, 1, 4, 9, 16, 25]" in out
    loky = [r for r in rows if r.role == "loky worker"]
    assert len(loky) == 2 and all(r.name.startswith("gs:loky") for r in loky), [(r.role, r.name) for r in rows]
