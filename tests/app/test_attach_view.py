"""File → Attach to a running job…: the picker, the Attached tab's live view, its stacks, a CPU
profile, Stop/Kill behind cleanup's checks, and Detach, on a real spawn pool gpuscope did not start.

Everything is real: the job (a process group of its own, started here, not by gpuscope), /proc,
py-spy, the store, Qt offscreen. There is no GPU here: the GPU plots give way to their note.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from apphelpers import make_window

from gpuscope.app.run.qt_attach_dialog import QtAttachDialog
from gpuscope.app.run.qt_process_tree import COL

pytestmark = pytest.mark.timeout(180)
SHOTS = Path(tempfile.gettempdir()) / "gpuscope-test-shots"

POOL = """
import multiprocessing as mp, time
def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
def work(n):
    time.sleep(0.02)
    return burn(n)
if __name__ == "__main__":
    mp.set_start_method("spawn")
    print("ready", flush=True)
    with mp.Pool(2) as pool:
        while True:
            pool.map(work, [60_000] * 8)
"""


@pytest.fixture
def pool_job(tmp_path):
    """A spawn pool started outside gpuscope; ended (its whole group) after the test."""
    script = tmp_path / "pool_job.py"
    script.write_text(POOL)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
    proc.wait(timeout=30)


def _save(widget, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    widget.grab().save(str(SHOTS / name))


def _roles(presenter) -> dict[int, str]:
    return {pid: r.role for pid, r in presenter.model.procs.items() if r.alive}


def _attach(qtbot, w, job):
    """File → Attach…: the picker lists the job; choosing it attaches."""
    action = w.attach.menu_action
    assert action is not None and action in w.file_menu.actions()
    dialog = QtAttachDialog(w)
    dialog.show()
    def listed() -> bool:   # a listing made as the pool's workers started may see the parent alone
        i = dialog.model.index_of(job.pid)
        return i is not None and int(dialog.model.rows[i].cells[4]) >= 4

    qtbot.waitUntil(listed, timeout=30_000)
    row = dialog.model.rows[dialog.model.index_of(job.pid)]
    assert row.kind == "multiprocessing parent", row
    assert int(row.cells[4]) >= 4, row            # the parent, 2 workers, the resource tracker
    assert "pool_job.py" in row.cells[2] and row.cells[-1].startswith(pwd.getpwuid(os.getuid()).pw_name), row
    assert not dialog.attach_button.isEnabled()
    assert dialog.select_pid(job.pid) and dialog.attach_button.isEnabled()
    first = dialog.model.refreshes
    qtbot.waitUntil(lambda: dialog.model.refreshes > first, timeout=30_000)   # it refreshes while open
    assert dialog.model.chosen == job.pid                                       # and keeps the choice
    _save(dialog, "attach-picker.png")
    dialog.attach_button.click()
    assert dialog.result() == dialog.DialogCode.Accepted and dialog.chosen_pid == job.pid
    w.attach.attach(dialog.chosen_pid)
    p = w.attach
    qtbot.waitUntil(lambda: p.session is not None, timeout=30_000)
    assert w.tabs.currentWidget() is p.tab
    return p


def test_attach_live_view_stacks_profile_and_detach(qtbot, gpuscope_home, pool_job):
    from gpuscope.store.lookup import open_run

    w = make_window(qtbot)
    p = _attach(qtbot, w, pool_job)
    qtbot.waitUntil(lambda: sorted(_roles(p).values()).count("pool worker") == 2
                    and "resource tracker" in _roles(p).values(), timeout=30_000)
    assert _roles(p)[pool_job.pid] == "main"
    qtbot.waitUntil(lambda: p.model.batches >= 3, timeout=30_000)
    tree = p.tab.tree
    tree.refresh()
    workers_ = [pid for pid, role in _roles(p).items() if role == "pool worker"]
    assert all(tree.items[pid].text(COL["Process"]) == "pool worker" for pid in workers_)
    assert all(pid in {s for s, _ in p.model.series[("proc", "cpu")].items()} for pid in workers_)
    assert "pool worker" in p.tab.state.text() and "pool_job.py" in p.tab.live.title.text()
    assert not p.tab.live.gpu_shown                # no GPU here: the note instead of the GPU plots
    _save(w, "attach-live.png")

    # Take stacks now: every process's stacks, the workers grouped on one card
    task = p.take_stacks()
    assert task is not None
    qtbot.waitUntil(lambda: p.last_stacks is not None and bool(p.tab.stacks.card_widgets), timeout=60_000)
    assert p.tab.bottom.currentWidget() is p.tab.stacks
    read = {s.pid for s in p.last_stacks.processes if s.threads}
    assert set(workers_) <= read and pool_job.pid in read
    assert all(any(pid in c.pids for c in p.tab.stacks.card_widgets) for pid in workers_)
    assert "without pausing them" in p.tab.stacks.head.text()
    _save(w, "attach-stacks.png")

    # Profile: top functions per role (the workers' burn) and a flame graph
    p.profile(2.0)
    qtbot.waitUntil(lambda: p.last_profile is not None, timeout=90_000)
    prof = p.last_profile
    assert prof.samples > 0, prof.note
    assert any(t.function == "burn" for t in prof.top.get("pool worker", [])), prof.top
    panel = p.tab.profile
    assert panel.table.rowCount() > 0 and panel.table.item(0, 0).text() in ("pool worker", "main")
    boxes = panel.flame.boxes
    assert any(b.depth == 0 and b.name == "pool worker" for b in boxes)
    assert any(b.name == "burn" for b in boxes)
    assert not any(b.name.startswith("process ") for b in boxes)
    assert os.path.isfile(prof.path) and prof.path.startswith(str(gpuscope_home))
    _save(w, "attach-profile.png")

    # Detach: the job goes on, the session is a run (kind "attached") in the store
    with qtbot.waitSignal(p.sigDetached, timeout=60_000) as detached:
        p.tab.detach_button.click()
    run_id = detached.args[0]
    assert run_id and p.session is None and pool_job.poll() is None
    assert "detached: the job goes on" in p.tab.state.text()
    record = open_run(run_id)
    assert record.kind == "attached"
    assert not p.tab.detach_button.isEnabled() and not tree.build_menu(workers_[0]).actions()[0].isEnabled()


def test_stop_is_asked_first_and_checked_like_cleanup(qtbot, gpuscope_home, pool_job):
    w = make_window(qtbot)
    p = _attach(qtbot, w, pool_job)
    qtbot.waitUntil(lambda: list(_roles(p).values()).count("pool worker") == 2, timeout=30_000)
    tree = p.tab.tree
    tree.refresh()
    victim = next(pid for pid, role in _roles(p).items() if role == "pool worker")
    assert p.model.procs[victim].create_time is not None     # the identity the stop re-checks
    asked: list[str] = []
    tree.confirm = lambda title, text: asked.append(text) or False
    tree.build_menu(victim).actions()[0].trigger()
    assert asked and f"pid {victim} (pool worker" in asked[0]
    assert not tree.pending and os.path.exists(f"/proc/{victim}")     # refused: nothing was sent
    # a stale identity (the pid's start time differs): refused by cleanup's check, nothing sent
    p.model.procs[victim].create_time = (p.model.procs[victim].create_time or 0) - 1000
    tree.confirm = lambda title, text: True
    with qtbot.waitSignal(tree.sigActionDone, timeout=30_000) as stale:
        tree.build_menu(victim).actions()[0].trigger()
    assert not stale.args[0].ok and os.path.exists(f"/proc/{victim}"), stale.args[0].message
    p.model.procs[victim].create_time = p.model.create_times[victim]
    with qtbot.waitSignal(tree.sigActionDone, timeout=30_000) as done:
        tree.build_menu(victim).actions()[0].trigger()
    assert done.args[0].ok, done.args[0].message
    qtbot.waitUntil(lambda: victim not in _roles(p), timeout=30_000)
    with qtbot.waitSignal(p.sigDetached, timeout=60_000):
        p.detach()
    assert pool_job.poll() is None          # the pool goes on (it replaced its worker)


def test_a_job_that_ends_is_detached_and_kept(qtbot, gpuscope_home, pool_job):
    from gpuscope.store.lookup import open_run

    w = make_window(qtbot)
    p = _attach(qtbot, w, pool_job)
    qtbot.waitUntil(lambda: list(_roles(p).values()).count("pool worker") == 2, timeout=30_000)
    with qtbot.waitSignal(p.sigDetached, timeout=60_000) as detached:
        os.killpg(pool_job.pid, signal.SIGKILL)        # the job ends (the test's own job, not gpuscope)
    assert p.session is None and p.tab.state.text().startswith("the job has ended")
    assert not any(r.alive for r in p.model.procs.values())
    assert open_run(detached.args[0]).kind == "attached"


def test_attach_to_nothing_says_one_line(qtbot, gpuscope_home):
    w = make_window(qtbot)
    with qtbot.waitSignal(w.sigErrorShown, timeout=30_000) as shown:
        w.attach.attach(2 ** 22 + 12345)
    assert shown.args[0].startswith("no process") and "\n" not in shown.args[0]
    assert w.attach.session is None and not w.attach.busy
