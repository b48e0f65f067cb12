"""Qt-free view models: the live plots' envelope and the timeline's human units (no Qt imported)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from gpuscope.views.timeline_text import fmt_ns


def test_envelope_keeps_peaks_and_gaps():
    from gpuscope.views.plot_buffers import envelope

    x = np.arange(10_000, dtype=float)
    y = np.zeros(10_000)
    y[1234] = 99.0
    y[5120:5376] = np.nan                  # two whole buckets of 128 points: a gap
    y[7000] = np.nan                       # one NaN inside a bucket: ignored
    ex, ey = envelope(x, y, 200)
    assert len(ex) <= 200 + 128 and np.nanmax(ey) == 99.0 and ex[0] == 0 and ex[-1] == 9999
    assert np.isnan(ey).sum() == 4                       # 2 buckets x (min, max)
    assert not np.isnan(ey[(ex >= 6900) & (ex <= 7100)]).any()
    small_x, small_y = envelope(x[:50], y[:50], 200)     # short series are drawn as they are
    assert np.array_equal(small_x, x[:50]) and np.array_equal(small_y, y[:50])


def test_measure_box_reads_in_human_units():
    assert fmt_ns(2_217_765_207) == "2.218 s"
    assert fmt_ns(12_345) == "12.3 µs" and fmt_ns(1_500_000) == "1.5 ms" and fmt_ns(950) == "950 ns"


def test_the_view_models_import_no_qt():
    """Every module of gpuscope.views (and the façade) imports without Qt, in a fresh interpreter."""
    code = ("import pkgutil, importlib, sys, gpuscope.views, gpuscope.api\n"
            "for m in pkgutil.iter_modules(gpuscope.views.__path__, 'gpuscope.views.'):\n"
            "    importlib.import_module(m.name)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph', 'gpuscope.app'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
