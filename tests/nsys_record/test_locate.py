"""Finding nsys: GPUSCOPE_NSYS, the provisioned cache, prefer, and the messages when nothing is there."""

from __future__ import annotations

import os

import pytest

from gpuscope.errors import UserError
from gpuscope.nsys import locate

pytestmark = pytest.mark.nsys


def test_gpuscope_nsys_through_the_bin_link_resolves_to_the_real_binary(provisioned, monkeypatch):
    inst = next(iter(provisioned.values()))
    root = str(inst.nsys)[: -len(locate.DEBIAN_TARGET + "/nsys")]
    link = os.path.join(root, "usr/lib/nsight-systems/bin/nsys")   # the link that hung a profile
    assert os.path.islink(link)
    monkeypatch.setenv("GPUSCOPE_NSYS", link)
    found = locate.find_nsys()
    assert found.source == "GPUSCOPE_NSYS"
    assert found.nsys == inst.nsys and found.nsys.parent.name == "target-linux-x64"
    assert found.version == inst.version and found.version_tuple[:2] == tuple(map(int, inst.release.split(".")))
    assert found.importer is not None and found.importer.name == "QdstrmImporter" and found.importer.is_file()
    assert found.env["LD_LIBRARY_PATH"].endswith("usr/lib/x86_64-linux-gnu")
    assert locate.list_installs()[0] == found


def test_gpuscope_nsys_folder_is_accepted(provisioned, monkeypatch):
    inst = next(iter(provisioned.values()))
    monkeypatch.setenv("GPUSCOPE_NSYS", str(inst.nsys.parent))
    assert locate.find_nsys().nsys == inst.nsys


def test_cache_is_searched_newest_first_and_prefer_picks_a_release(provisioned, monkeypatch):
    monkeypatch.delenv("GPUSCOPE_NSYS", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(locate, "SYSTEM_GLOBS", ())
    installs = locate.list_installs()
    assert [i.source for i in installs] == ["cache"] * len(provisioned)
    assert [i.version_tuple for i in installs] == sorted((i.version_tuple for i in installs), reverse=True)
    for release, inst in provisioned.items():
        assert locate.find_nsys(release).nsys == inst.nsys
    assert locate.find_nsys().version_tuple == max(i.version_tuple for i in installs)


def test_version_strings():
    assert locate.parse_version("NVIDIA Nsight Systems version 2022.4.2.1-df9881f") == ("2022.4.2.1", (2022, 4, 2, 1))
    assert locate.parse_version("2024.2.3.38~12.5.0-2+b1") == ("2024.2.3.38", (2024, 2, 3, 38))
    assert locate.parse_version("no version here") is None


def test_missing_nsys_is_a_one_line_user_error(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUSCOPE_NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GPUSCOPE_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(locate, "SYSTEM_GLOBS", ())
    with pytest.raises(UserError) as err:
        locate.find_nsys()
    assert str(err.value) == "Nsight Systems (nsys) not found; install it or run scripts/provision_nsys.py"
    assert locate.list_installs() == []


def test_bad_gpuscope_nsys_and_unknown_version_are_user_errors(provisioned, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_NSYS", str(tmp_path / "nsys"))
    with pytest.raises(UserError, match=r"^GPUSCOPE_NSYS=.* is not a working nsys binary$"):
        locate.find_nsys()
    monkeypatch.delenv("GPUSCOPE_NSYS")
    with pytest.raises(UserError, match=r"^Nsight Systems 2099.1 not found \(found: .*2\d\d\d\.\d"):
        locate.find_nsys("2099.1")
