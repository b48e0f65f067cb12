"""A remote report is read there, never from this machine's disk: a guard in the window's process
records every open, stat, scandir or listdir of a path under the agent's gpuscope home while the
report opens (the tests' "remote" shares this disk, so a stray local read would go unnoticed
otherwise). Also what travels with a remote report: its pool flow arrows, the title's counts, and
each process's structured coverage fix."""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from pathlib import Path

import numpy as np
import pytest
from apphelpers import script
from test_remote_window import cli_run, connected, disconnect, remote_home  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.gui, pytest.mark.timeout(180)]

_GUARDS: list[RemoteDiskGuard] = []     # the guards on now (an audit hook cannot be removed)
_HOOKED = threading.Lock()
_AUDITED = {"open", "os.listdir", "os.scandir"}


def _path_of(value: object) -> str | None:
    if isinstance(value, (str, bytes, os.PathLike)):
        try:
            return os.path.abspath(os.fsdecode(value))
        except (TypeError, ValueError):
            return None
    return None      # a file descriptor: opened earlier, by path


def _audit(event: str, args: tuple) -> None:
    if event in _AUDITED and _GUARDS and args:
        for guard in list(_GUARDS):
            guard.check(event, args[0])


class RemoteDiskGuard:
    """Records each open/stat/lstat/scandir/listdir of a path under ``root`` in this process (every
    thread) while on: ``seen`` holds (what, path, the calling lines)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.abspath(root)
        self.seen: list[tuple[str, str, str]] = []
        self.monkeypatch = pytest.MonkeyPatch()     # its own: undoing it leaves the test's patches alone
        with _HOOKED:
            if not getattr(sys, "_gpuscope_remote_guard", False):
                sys.addaudithook(_audit)
                sys._gpuscope_remote_guard = True   # type: ignore[attr-defined]

    def check(self, what: str, value: object) -> None:
        path = _path_of(value)
        if path is not None and (path == self.root or path.startswith(self.root + os.sep)):
            self.seen.append((what, path, "".join(traceback.format_stack(limit=8)[:-2])))

    def __enter__(self) -> RemoteDiskGuard:
        for name in ("stat", "lstat"):      # no audit event for these: wrap them while the guard is on
            real = getattr(os, name)

            def wrapped(path, *args, _real=real, _name=name, **kwargs):
                self.check(f"os.{_name}", path)
                return _real(path, *args, **kwargs)

            self.monkeypatch.setattr(os, name, wrapped)
        _GUARDS.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _GUARDS.remove(self)
        self.monkeypatch.undo()

    def report(self) -> str:
        return "\n".join(f"{what} {path}\n{where}" for what, path, where in self.seen[:3])


def test_the_guard_sees_a_read_under_the_remote_home(tmp_path):
    inside = tmp_path / "remote-home" / "runs"
    inside.mkdir(parents=True)
    (inside / "x").write_text("x")
    real_stat = os.stat
    with RemoteDiskGuard(tmp_path / "remote-home") as guard:
        Path(tmp_path / "elsewhere").exists()
        assert not guard.seen
        reader = threading.Thread(target=lambda: (inside / "x").read_text())   # another thread too
        reader.start()
        reader.join()
        assert "open" in {w for w, _, _ in guard.seen}
        inside.is_dir()
        os.listdir(inside)
        list(os.scandir(inside))
    assert [w for w, _, _ in guard.seen][-3:] == ["os.stat", "os.listdir", "os.scandir"]
    assert os.stat is real_stat                  # the real os.stat is back
    count = len(guard.seen)
    inside.is_dir()
    (inside / "x").read_text()
    assert len(guard.seen) == count              # off: nothing recorded


def test_a_remote_report_opens_without_reading_the_remote_folder_here(qtbot, remote_home, gpuscope_home):  # noqa: F811
    from gpuscope import api
    from gpuscope.trace.flows import run_flows

    run_dir = json.loads(cli_run(remote_home, "--json", script("pool_spawn.py"), "1").splitlines()[-1])["run_dir"]
    w = connected(qtbot, remote_home)
    view = w.report_view
    with RemoteDiskGuard(remote_home) as guard:
        with qtbot.waitSignal(w.sigReportLoaded, timeout=60_000):
            w.load_report(run_dir)
        qtbot.waitUntil(lambda: view.timeline.layout_model is not None and w.reports.idle, timeout=30_000)
        w.tabs.setCurrentWidget(view)
        qtbot.wait(200)
    assert not guard.seen, guard.report()
    flows = view.timeline.flows
    full = api.load_report(run_dir).timeline                   # what the host has (the same disk here)
    want = run_flows(run_dir, full)
    assert flows is not None and len(flows) == len(want) == 8    # the pool's 8 tasks, each from its job
    for name in ("src_pid", "dst_pid", "src_ns", "dst_ns", "job", "task"):
        assert np.array_equal(getattr(flows, name), getattr(want, name)), name
    assert len(view.timeline.visible_flows()) == 8               # drawn in the whole-run view
    assert f"{len(full.ranges):,} ranges, 0 kernels" in view.title.text()
    if os.environ.get("GPUSCOPE_REMOTE_SHOTS"):
        Path(os.environ["GPUSCOPE_REMOTE_SHOTS"]).mkdir(parents=True, exist_ok=True)
        w.grab().save(str(Path(os.environ["GPUSCOPE_REMOTE_SHOTS"]) / "remote-report-flows.png"))
    disconnect(qtbot, w)


def test_the_agents_timeline_flows_op(remote_home):  # noqa: F811
    from gpuscope import api
    from gpuscope.errors import UserError
    from gpuscope.remote.connection import connect_local
    from gpuscope.remote.timelineops import decode_column
    from gpuscope.trace.flows import run_flows
    from test_remote_window import AGENTS, remote_env

    out = json.loads(cli_run(remote_home, "--json", script("pool_spawn.py"), "0.5").splitlines()[-1])
    conn = connect_local(env=remote_env(remote_home), host="gpu-box")
    AGENTS.append(conn)
    want = run_flows(out["run_dir"], api.load_report(out["run_dir"]).timeline)
    for target in ({"run": out["run_id"]}, {"path": out["run_dir"]}):
        sent = conn.request("timeline_flows", target)
        assert np.array_equal(decode_column(sent["columns"]["dst_ns"]), want.dst_ns) and len(want) == 4
    with pytest.raises(UserError, match="^timeline_flows: give run or path$"):
        conn.request("timeline_flows", {})


def test_a_remote_past_run_opens_without_reading_the_remote_folder_here(qtbot, remote_home, gpuscope_home):  # noqa: F811
    cli_run(remote_home, script("pool_spawn.py"), "0.5")
    w = connected(qtbot, remote_home)
    qtbot.waitUntil(lambda: w.history.task is None and len(w.history.rows) == 1, timeout=30_000)
    with RemoteDiskGuard(remote_home) as guard:
        with qtbot.waitSignal(w.session.sigPastShown, timeout=30_000):
            w.open_past_run(w.history.rows[0])
        qtbot.waitUntil(lambda: w.reports.idle and w.report_view.timeline.layout_model is not None, timeout=30_000)
        w.tick()
    assert not guard.seen, guard.report()
    procs = w.model.procs.values()
    assert sorted(r.role for r in procs) == ["main", "pool worker", "pool worker"]
    assert all(r.record is not None for r in procs)      # the record's rows (exits, CPU), pulled
    assert [r.record.exit_code for r in procs if r.role == "main"] == [0]
    disconnect(qtbot, w)


def test_a_remote_live_run_and_its_report_read_nothing_of_the_remote_folder_here(qtbot, remote_home,  # noqa: F811
                                                                                 gpuscope_home):
    from test_remote_window import start_remote

    w = connected(qtbot, remote_home)
    with RemoteDiskGuard(remote_home) as guard:
        start_remote(qtbot, w, "pool_spawn.py", "0.5")
        qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
        qtbot.waitUntil(lambda: w.last_report is not None and bool(w.last_report.summaries.get("nvtx")),
                        timeout=60_000)
        w.tabs.setCurrentWidget(w.report_view)
        qtbot.waitUntil(lambda: w.reports.idle and w.report_view.timeline.flows is not None, timeout=30_000)
        w.tick()
    assert not guard.seen, guard.report()
    assert str(w.last_result.run_dir).startswith(str(remote_home)) and len(w.report_view.timeline.flows) == 4
    disconnect(qtbot, w)


def test_a_local_past_run_carries_its_records_rows(remote_home):  # noqa: F811
    from gpuscope.runrecord import read_folder
    from gpuscope.views.past_run import load_past_run

    out = json.loads(cli_run(remote_home, "--json", script("pool_spawn.py"), "0.5").splitlines()[-1])
    rows, left = load_past_run(out["run_id"], out["run_dir"]).rows     # read here: the folder is this disk's
    assert [r.pid for r in rows] == [r.pid for r in read_folder(out["run_dir"]).processes] and len(rows) == 3
    assert left == []


def test_a_remote_reports_coverage_keeps_its_structured_fix(qtbot):
    """The report's JSON (what the agent's report_summary sends) read back as the client does: the
    banner offers "Apply to next run" with the fix itself, not only its sentence."""
    from gpuscope.app.report.qt_report_view import CoverageBanner
    from gpuscope.fix import SetNsysForkTracing, SetStartMethod
    from gpuscope.remote.client_records import report
    from gpuscope.trace.coverage import Coverage, ProcessCoverage

    sent = Coverage([
        ProcessCoverage(11, "main", None, False, 3, 3, "ok"),
        ProcessCoverage(12, "pool worker", "fork", True, 5, 0, "missing", 5, "nsys did not follow the fork",
                        "use spawn", SetStartMethod("spawn")),
        ProcessCoverage(13, "pool worker", "fork", True, 5, 0, "missing", 5, "the fork flag was off",
                        "turn it on", SetNsysForkTracing(True)),
    ], fork_flag=False)
    data = json.loads(json.dumps({"path": "/there/run", "coverage": sent.to_dict(), "processes": [],
                                  "notes": []}))
    got = report(data, "gpu-box").coverage
    assert got == sent
    assert [p.action for p in got.processes] == [None, SetStartMethod("spawn"), SetNsysForkTracing(True)]
    unknown = json.loads(json.dumps(sent.to_dict()))
    unknown["processes"][1]["action"] = {"kind": "from-a-newer-gpuscope", "x": 1}
    assert Coverage.from_dict(unknown).processes[1].action is None     # read as none, not an error
    banner = CoverageBanner()
    qtbot.addWidget(banner)
    banner.show_report(report(data, "gpu-box"))
    assert banner.action == SetStartMethod("spawn")
    assert banner.apply_button.text().startswith("Apply to next run:")
