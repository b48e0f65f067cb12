"""Finding nsys: GPUSCOPE_NSYS, the provisioned cache, prefer, and the messages when nothing is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


# -- nsys found through PATH, for real: a subprocess whose PATH holds a provisioned build's usr/bin ------

def path_env(inst: locate.NsysInstall, cache: str | None = None) -> dict[str, str]:
    """This environment with ``inst``'s ``usr/bin`` (Debian's ``nsys`` link) first on PATH and no
    GPUSCOPE_NSYS; with ``cache``, GPUSCOPE_CACHE too (an empty one hides the provisioned builds)."""
    root = str(inst.nsys)[: -len(locate.DEBIAN_TARGET + "/nsys")]
    env = {k: v for k, v in os.environ.items() if k != "GPUSCOPE_NSYS"}
    env["PATH"] = f"{root}/usr/bin:{env.get('PATH', '/usr/bin:/bin')}"
    if cache is not None:
        env["GPUSCOPE_CACHE"] = cache
    return env


FIND = ("import json; from gpuscope.nsys import locate; i = locate.find_nsys(); "
        "print(json.dumps({'source': i.source, 'nsys': str(i.nsys), 'version': i.version, "
        "'importer': str(i.importer), 'ld': i.env.get('LD_LIBRARY_PATH'), "
        "'all': [[j.source, j.version] for j in locate.list_installs()]}))")


def _find_in_subprocess(env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", FIND], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_nsys_on_path_comes_before_the_provisioned_cache(provisioned):
    """The oldest build on PATH wins over the newer ones in the cache, found through the usr/bin link."""
    inst = provisioned[min(provisioned, key=lambda k: provisioned[k].version_tuple)]
    assert os.path.islink(str(inst.nsys)[: -len(locate.DEBIAN_TARGET + "/nsys")] + "/usr/bin/nsys")
    found = _find_in_subprocess(path_env(inst))
    assert (found["source"], found["nsys"], found["version"]) == ("PATH", str(inst.nsys), inst.version)
    assert found["importer"] == str(inst.importer) and found["ld"] == inst.env["LD_LIBRARY_PATH"]
    assert found["all"][0] == ["PATH", inst.version]
    assert sorted(v for s, v in found["all"] if s == "cache") == sorted(
        i.version for i in provisioned.values() if i.nsys != inst.nsys)     # the same build is listed once


def test_nsys_on_path_alone_is_enough(provisioned, tmp_path):
    inst = provisioned[max(provisioned, key=lambda k: provisioned[k].version_tuple)]
    found = _find_in_subprocess(path_env(inst, cache=str(tmp_path / "empty-cache")))
    assert (found["source"], found["nsys"], found["version"]) == ("PATH", str(inst.nsys), inst.version)
    assert [s for s, _ in found["all"]].count("cache") == 0
