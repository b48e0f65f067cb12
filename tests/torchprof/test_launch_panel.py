"""The launch panel's torch.profiler group gives RunSpec.torch_profile, and takes it back."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")   # before any Qt import

from gpuscope.errors import UserError
from gpuscope.spec import TorchProfileOptions
from tests.torchprof.conftest import SCRIPTS

pytestmark = pytest.mark.gui


def _panel(qtbot):
    from gpuscope.app.run.qt_launch_panel import QtLaunchPanel

    panel = QtLaunchPanel()
    qtbot.addWidget(panel)
    panel.set_script(str(SCRIPTS / "ddp_loop.py"))
    return panel


def test_the_group_gives_the_options_and_takes_them_back(qtbot):
    panel = _panel(qtbot)
    assert panel.spec().torch_profile == TorchProfileOptions()
    panel.torch_profile.setChecked(True)
    panel.tp_ranks.setText("1,0")
    panel.tp_schedule.setText("1,1,3")
    panel.tp_options["memory"].setChecked(True)
    options = panel.spec().torch_profile
    assert options == TorchProfileOptions(enabled=True, ranks=(0, 1), schedule=(1, 1, 3, 1), memory=True)
    again = _panel(qtbot)
    again.set_spec(panel.spec())
    assert again.spec().torch_profile == options


def test_a_bad_schedule_is_one_line(qtbot):
    panel = _panel(qtbot)
    panel.torch_profile.setChecked(True)
    panel.tp_schedule.setText("1,1,0")
    with pytest.raises(UserError, match=r"^--torch-profile-schedule takes WAIT,WARMUP,ACTIVE"):
        panel.spec()
