"""Qt's xcb plugin on a machine that lacks some of its libraries: one line naming them and the
packages to install (before Qt aborts with only "could not load the Qt platform plugin").

The plugin here is a real shared library built with gcc that links to stand-ins for two xcb
libraries, which are then removed: ``ldd`` reports them missing exactly as it does for
PySide6's libqxcb.so on a fresh machine."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuscope.app import qtcheck
from gpuscope.errors import UserError


# sonames no machine has, with made-up packages: used where this machine has Qt's xcb libraries
# installed (the table's own entries are checked by test_unknown_library_still_named)
STAND_INS = {"libxcb-gpuscopetest-a.so.0": ("libxcb-gpuscopetest-a0", "xcb-gpuscopetest"),
             "libxcb-gpuscopetest-b.so.1": ("libxcb-gpuscopetest-b1", "xcb-gpuscopetest")}


def _absent_here(count: int, monkeypatch) -> list[str]:
    """``count`` libraries of the table that this machine's loader does not know (ldconfig -p);
    where it knows them all, two made-up ones added to the table for the test."""
    known = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    absent = [name for name in qtcheck.XCB_PACKAGES if f"{name} " not in known]
    if len(absent) >= count:
        return absent[:count]
    for name, packages in STAND_INS.items():
        monkeypatch.setitem(qtcheck.XCB_PACKAGES, name, packages)
    return list(STAND_INS)[:count]


@pytest.fixture
def plugin_missing_two(tmp_path, monkeypatch):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the test plugin (it is on every machine of this project)")
    names = _absent_here(2, monkeypatch)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (tmp_path / "s.c").write_text("int stub(void) { return 0; }\n")
    for soname in names:
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(stubs / soname), f"-Wl,-soname,{soname}",
                        str(tmp_path / "s.c")], check=True)
    plugin = tmp_path / "libqxcb.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plugin), str(tmp_path / "s.c"), "-Wl,--no-as-needed",
                    *(str(stubs / n) for n in names)], check=True)
    return plugin, stubs, names


def test_missing_libraries_are_named_with_their_packages(plugin_missing_two, monkeypatch):
    plugin, stubs, names = plugin_missing_two
    monkeypatch.setenv("LD_LIBRARY_PATH", str(stubs))
    assert qtcheck.missing_libraries(plugin) == [] and qtcheck.xcb_problem(plugin) is None
    monkeypatch.delenv("LD_LIBRARY_PATH")
    shutil.rmtree(stubs)
    assert qtcheck.missing_libraries(plugin) == names
    line = qtcheck.xcb_problem(plugin)
    (deb1, fed1), (deb2, fed2) = (qtcheck.XCB_PACKAGES[n] for n in names)
    assert "\n" not in line
    assert f"missing {names[0]}, {names[1]}" in line
    assert f"sudo apt-get install {deb1} {deb2} (Debian/Ubuntu)" in line
    assert f"sudo dnf install {' '.join(dict.fromkeys([fed1, fed2]))} (Fedora)" in line
    # gpuscope / gpuscope gui refuse with that line before any Qt widget exists
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setattr(qtcheck, "xcb_plugin", lambda: plugin)
    with pytest.raises(UserError) as err:
        qtcheck.check_qt()
    assert str(err.value) == line
    # gpuscope doctor says the same, as a failed (non-essential) check with the install line
    from gpuscope.commands.doctor import check_qt_platform

    check = check_qt_platform()
    assert not check.ok and not check.essential and f"{check.detail}; {check.advice}" == line


def test_xcb_is_checked_only_when_qt_will_use_it():
    assert qtcheck.xcb_wanted({}) and qtcheck.xcb_wanted({"QT_QPA_PLATFORM": "xcb"})
    assert qtcheck.xcb_wanted({"QT_QPA_PLATFORM": "xcb;wayland"})
    assert not qtcheck.xcb_wanted({"QT_QPA_PLATFORM": "offscreen"})
    assert not qtcheck.xcb_wanted({"QT_QPA_PLATFORM": "wayland;xcb"})
    assert qtcheck.xcb_problem(env={"QT_QPA_PLATFORM": "offscreen"}) is None


def test_unknown_library_still_named():
    assert qtcheck.install_line(["libfoo.so.9"]) == "install the packages that provide them"
    assert qtcheck.install_line(["libxcb-icccm.so.4", "libxcb-shape.so.0", "libxcb-randr.so.0"]) == (
        "sudo apt-get install libxcb-icccm4 libxcb-shape0 libxcb-randr0 (Debian/Ubuntu) or "
        "sudo dnf install xcb-util-wm libxcb (Fedora)")
