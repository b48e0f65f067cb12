"""gpuscope's data folder without platformdirs on Linux is platformdirs' answer (importing it costs
10-40 ms before `gpuscope run` can start its program, issue 14.4)."""

from __future__ import annotations

import os

import platformdirs
import pytest

from gpuscope import paths


@pytest.mark.parametrize("home", ["tmp", "relative", None], ids=repr)
@pytest.mark.parametrize("xdg", [None, "", "   ", "/srv/data", "relative/data", "~/data"], ids=repr)
def test_default_data_folder_is_platformdirs_answer(xdg, home, monkeypatch, tmp_path):
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", str(tmp_path) if home == "tmp" else home)
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    assert paths.default_data_root() == platformdirs.user_data_dir("gpuscope", appauthor=False)


def test_data_folder_comes_from_gpuscope_home_first(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert paths.data_root(tighten=False) == str(tmp_path / "home")
    assert paths.data_dir(tighten=False) == tmp_path / "home"
    monkeypatch.delenv("GPUSCOPE_HOME")
    assert paths.data_root(tighten=False) == os.path.join(tmp_path, "xdg", "gpuscope")
    assert paths.runs_dir(tighten=False) == tmp_path / "xdg" / "gpuscope" / "runs"
    assert (tmp_path / "xdg" / "gpuscope" / "runs").is_dir()
