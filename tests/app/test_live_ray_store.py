"""The Ray object store in the memory plot (issue 13), from a real Ray run: the stored samples and
the run folder's ray_store.jsonl, as the app reopens a past run (and reads a running one)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from gpuscope.views.live_model import LiveModel
from gpuscope.telemetry.ray_store import StoreTail, read_ray_store
from tests import requires
from tests.runs.helpers import gpuscope, script, summary

requires.ray()
pytestmark = [pytest.mark.gui, pytest.mark.ray]


def test_object_store_curves_in_the_memory_plot(qtbot, run_env, gpuscope_home, tmp_path):
    from gpuscope.app.run.qt_live_view import QtLiveView
    from gpuscope.store import db
    from gpuscope.telemetry.series import load_series

    proc = gpuscope("run", "--json", script("ray_spill.py"), env=run_env, timeout=280)
    result = summary(proc)
    assert result["exit_code"] == 0, proc.stderr.decode()[-3000:]
    run_dir = Path(result["run_dir"])
    samples = read_ray_store(run_dir)
    assert len(samples) >= 4, (result["exit_code"], result["notes"], result["processes"][:1])
    tail = StoreTail(run_dir)            # what a running app reads: every sample once
    assert tail.read_new() == samples and tail.read_new() == []
    conn = db.connect()                  # the test's GPUSCOPE_HOME: the run's own store
    try:
        series = load_series(conn, result["run_id"])
    finally:
        conn.close()
    model = LiveModel()
    view = QtLiveView(model)
    qtbot.addWidget(view)
    view.resize(1100, 700)
    assert series is not None
    from gpuscope.views.procroles import RoleReader

    model.load_series(series, RoleReader(run_dir).lookup())   # as the app reopens a past run
    model.add_ray_store(samples)
    view.set_whole_run()
    view.refresh()
    curves = view.plots["rss"].curves
    assert ("ray", "used", 0) in curves and ("ray", "spilled_bytes", 0) in curves, list(curves)
    _, used = curves[("ray", "used", 0)].getData()
    _, spilled = curves[("ray", "spilled_bytes", 0)].getData()
    assert np.nanmax(used) >= 20 and np.nanmax(spilled) >= 20          # drawn in MiB
    assert view._label("ray", "used", 0) == "Ray object store"
    # Ray's C++ processes, fork children that exec'd, are named by their program as in the rows
    assert {"ray GCS", "ray raylet"} <= {row.role for row in model.procs.values()}
    folder = Path(os.environ.get("GPUSCOPE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    view.show()
    qtbot.wait(200)
    assert view.grab().save(str(folder / "live-ray-object-store.png"))
