"""`python -m gpuscope gui --run … --screenshot … --exit-when-done`: the scripted path, as a user runs it."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from apphelpers import script

pytestmark = pytest.mark.gui


def png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_scripted_run_screenshot_and_exit(tmp_path, run_env, app_settings):
    out = tmp_path / "shots" / "timeline.png"
    env = dict(run_env, GPUSCOPE_APP_SETTINGS=str(app_settings))
    env.pop("QT_QPA_PLATFORM", None)
    env.pop("DISPLAY", None)            # no display: scripted mode goes offscreen by itself
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "gui", "--run", script("pool_spawn.py"), "--args", "0.5",
                           "--start-method", "spawn", "--screenshot", str(out), "--screenshot-tab", "timeline",
                           "--size", "1024x700", "--exit-when-done"], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert png_size(out) == (1024, 700)
    assert b"Traceback" not in proc.stderr
    from gpuscope.store import db, runs

    rows = runs.list_runs(db.connect())
    assert len(rows) == 1 and rows[0].status == "exited" and rows[0].start_method == "spawn"


def test_bad_options_are_one_line(tmp_path, run_env):
    env = dict(run_env)
    env.pop("DISPLAY", None)
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "gui", "--run", str(tmp_path / "nope.py"),
                           "--screenshot", str(tmp_path / "x.png"), "--exit-when-done"],
                          env=env, capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert b"script not found" in proc.stderr and b"Traceback" not in proc.stderr
    assert not (tmp_path / "x.png").exists()
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "gui"], env=dict(env, QT_QPA_PLATFORM=""),
                          capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"no display" in proc.stderr


def test_screenshots_script_makes_the_acceptance_set(tmp_path, run_env, gpuscope_home):
    """scripts/screenshots.py (what the lead runs after merging): Run, Report, History at both sizes
    and the Help picture, from its own fresh home (this test's store stays empty). Offscreen here;
    under Xvfb it is the same sequence in an X window."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(run_env)
    env.pop("DISPLAY", None)
    proc = subprocess.run([sys.executable, str(root / "scripts" / "screenshots.py"), "--offscreen",
                           "--out", str(tmp_path), "--timeout", "120"], env=env, capture_output=True, timeout=280)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b"Traceback" not in proc.stderr
    for tab in ("run", "report", "history"):
        for w, h in ((1280, 800), (800, 500)):
            assert png_size(tmp_path / f"{tab}-{w}x{h}.png") == (w, h), (tab, w, h, proc.stderr.decode()[-1000:])
    assert png_size(tmp_path / "help-shortcuts.png")[0] >= 400
    assert png_size(tmp_path / "compare-startup-hover.png")[0] >= 300     # the chart, the tooltip drawn in
    assert png_size(tmp_path / "history-series.png")[0] >= 600
    assert png_size(tmp_path / "report-gpu-lanes.png")[0] >= 600
    from gpuscope.store import db, runs

    assert runs.list_runs(db.connect()) == []      # its runs went to its own temporary home
