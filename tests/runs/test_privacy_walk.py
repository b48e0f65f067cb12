"""paths.make_private reads the data folder with scandir (every `gpuscope run` walks every run, issue
14.4): it must change exactly what the os.walk it replaced changed, on a tree with loose modes,
links (to files, folders, nowhere) and a folder it cannot list."""

from __future__ import annotations

import os
import stat

from gpuscope.paths import make_private


def _walk_reference(top: str) -> int:
    """The os.walk version make_private had before."""
    changed = 0
    uid = os.getuid()
    for root, dirs, files in os.walk(top):
        for name, want in [(root, 0o700)] + [(os.path.join(root, f), 0o600) for f in files]:
            try:
                st = os.lstat(name)
                if st.st_uid != uid or stat.S_ISLNK(st.st_mode):
                    continue
                if stat.S_IMODE(st.st_mode) & 0o077:
                    os.chmod(name, stat.S_IMODE(st.st_mode) & want)
                    changed += 1
            except OSError:
                continue
    return changed


def _tree(top):
    (top / "runs" / "a" / "events").mkdir(parents=True)
    (top / "runs" / "b").mkdir(parents=True)
    (top / "elsewhere").mkdir()
    for f, mode in [("runs/a/stdout.log", 0o644), ("runs/a/events/1.log", 0o666), ("runs/b/x", 0o600),
                    ("gpuscope.sqlite", 0o640), ("elsewhere/keep", 0o644)]:
        (top / f).write_text("x")
        os.chmod(top / f, mode)
    os.symlink(top / "elsewhere", top / "runs" / "dirlink")
    os.symlink(top / "elsewhere" / "keep", top / "runs" / "filelink")
    os.symlink(top / "nowhere", top / "runs" / "broken")
    (top / "runs" / "locked").mkdir()
    (top / "runs" / "locked" / "inside").write_text("x")
    os.chmod(top / "runs" / "locked" / "inside", 0o644)
    os.chmod(top / "runs" / "locked", 0o355)     # no read: cannot be listed, group/others bits set
    for d, mode in [("", 0o755), ("runs", 0o775), ("runs/a", 0o755), ("runs/a/events", 0o700), ("elsewhere", 0o755)]:
        os.chmod(top / d, mode)


def _modes(top):
    out = {}
    for root, dirs, files in os.walk(top):
        for name in [root] + [os.path.join(root, f) for f in files + dirs]:
            out[os.path.relpath(name, top)] = os.lstat(name).st_mode
    return out


def test_the_scandir_walk_changes_what_os_walk_changed(tmp_path):
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    _tree(ours)
    _tree(ref)
    try:
        assert _modes(ours) == _modes(ref)
        assert make_private(ours) == _walk_reference(str(ref)) > 0
        assert _modes(ours) == _modes(ref)
        assert stat.S_IMODE(os.stat(ours / "elsewhere" / "keep").st_mode) == 0o600   # reached as itself
        assert make_private(ours) == 0
    finally:
        os.chmod(ours / "runs" / "locked", 0o700)
        os.chmod(ref / "runs" / "locked", 0o700)


def test_the_remote_agents_folder_keeps_its_modes(tmp_path):
    # the agent's virtual environments (gpuscope/remote/bootstrap.py) need their executable bits
    script = tmp_path / "agent" / "1.0-abc" / "bin" / "pip"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    os.chmod(script, 0o755)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "log").write_text("x")
    os.chmod(tmp_path / "runs" / "log", 0o644)
    make_private(tmp_path)
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(tmp_path / "runs" / "log").st_mode) == 0o600
