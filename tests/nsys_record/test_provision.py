"""scripts/provision_nsys.py: the layout it leaves, reruns that skip, and its one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuscope.nsys import locate
from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "provision_nsys.py"


@pytest.mark.nsys
def test_layout_and_marker(provisioned):
    for release, inst in provisioned.items():
        root = locate.provisioned_dirs()[0].parent / release
        marker = json.loads((root / locate.MARKER).read_text())
        assert marker["key"] == release and marker["nsys_version"] == inst.version
        assert (root / marker["nsys"]) == inst.nsys and (root / marker["importer"]) == inst.importer
        assert (root / "usr/lib/nsight-systems/host-linux-x64/libssh.so").resolve().is_file()  # link fixed


@pytest.mark.nsys
def test_rerun_skips_what_is_there(provisioned):
    dest = locate.provisioned_dirs()[0].parent
    # what is there is not downloaded nor unpacked again: each release says so (the run's time is no test)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--versions", ",".join(provisioned), "--dest", str(dest)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for release, inst in provisioned.items():
        assert f"provision_nsys: {release}: already present (nsys {inst.version})" in proc.stdout


def test_bad_arguments_are_one_line_errors(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--versions", "2099.1", "--dest", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == "provision_nsys: error: unknown version '2099.1'; choose from 2022.4, 2023.4, 2024.2\n"
    (tmp_path / "file").write_text("")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dest", str(tmp_path / "file" / "sub")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith("provision_nsys: error: ")
    assert len(proc.stderr.strip().splitlines()) == 1
