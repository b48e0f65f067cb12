"""Issue 12 in the app: findings live in the strip above the plots, badges on the process rows,
evidence and fix on click, "Apply to next run", Stop, the stacks of a stuck run side by side, and
past runs' findings from History (the same list as ``gpuscope findings``).

Real runs of the trigger scripts of ``tests/findings/scripts/`` through the window.
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

import pytest
from apphelpers import make_window
from PySide6.QtCore import Qt

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.fix import CleanupPids, SetStartMethod, StopRun
from tests.app.timeline_support import save_shot
from tests.findings.cli import call_json

pytestmark = pytest.mark.gui

SCRIPTS = Path(__file__).resolve().parents[1] / "findings" / "scripts"
DEADLOCK = SCRIPTS / "fork_deadlock.py"


def _codes(w) -> list[str]:
    return [f.code for f in w.live.findings.findings]


def _run(w, qtbot, script: Path, method: str) -> None:
    p = w.panel
    p.set_script(str(script))
    p.method.setCurrentIndex(p.method.findData(method))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=60_000):
        qtbot.mouseClick(p.run_button, Qt.MouseButton.LeftButton)


def _stop(w, qtbot, button) -> None:
    assert button.isVisible()
    with qtbot.waitSignal(w.controller.sigEnded, timeout=120_000):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _open_past(w, qtbot, run_id: str) -> None:
    from gpuscope.store import db, runs

    with closing(db.connect()) as conn:
        row = runs.get_run(conn, run_id)
    w.live.reset()
    w.findings.reset()
    assert w.live.findings.findings == [] and not w.live.findings.isVisible()
    w.open_past_run(row)
    qtbot.waitUntil(lambda: "past run" in w.live.title.text(), timeout=60_000)
    from gpuscope.app import workers

    workers.wait_all(60_000)


def test_findings_list_shows_evidence_fix_and_the_action_buttons(qtbot):
    """The reusable widget (compare view, report view): rows, details, and which button each action gets."""
    from gpuscope.app.widgets.qt_findings import FindingsList, FindingsStrip

    guard = Finding("missing-main-guard", "child processes failed to start 3 time(s)", "add the guard",
                    Severity.ERROR, (), evidence({"failed starts": 3}, ["RuntimeError: An attempt"]), StopRun(), 1)
    fork = Finding("fork-with-threads", "fork while thread lock-holder ran", "use spawn", Severity.WARNING,
                   (42,), evidence({"forks": 2}, ["lock-holder"], [42]), SetStartMethod("spawn"), 2)
    left = Finding("left-running", "1 process(es) still running", "stop them", Severity.WARNING, (7,),
                   evidence({"processes": 1}, (), [7]), CleanupPids((7,)), None)
    view = FindingsList()
    qtbot.addWidget(view)
    view.show()

    def rows():
        return [view.list.item(i).text() for i in range(view.list.count())]

    view.set_findings([guard])
    assert rows() == [guard.title]
    assert view.set_findings([guard, fork, left]) and not view.set_findings([guard, fork, left])
    assert rows() == [guard.title, fork.title, left.title]
    assert view.list.count() == 3 and view.current() == guard
    text = view.detail.toPlainText()
    assert "failed starts 3" in text and "RuntimeError: An attempt" in text and "add the guard" in text
    assert not view.stop_button.isVisible()                # not live: nothing to stop
    view.set_live(True)
    assert view.stop_button.isVisible() and not view.apply_button.isVisible()
    with qtbot.waitSignal(view.sigStop, timeout=1000):
        view.stop_button.click()
    view.select("fork-with-threads")
    assert view.apply_button.isVisible() and "spawn" in view.apply_button.text() and not view.stop_button.isVisible()
    with qtbot.waitSignal(view.sigApplyFix, timeout=1000) as sig:
        view.apply_button.click()
    assert sig.args == [SetStartMethod("spawn")]
    view.select("left-running", 7)
    assert view.cleanup_button.isVisible() and "found after the run" in view.detail.toPlainText()
    with qtbot.waitSignal(view.sigCleanup, timeout=1000) as sig:
        view.cleanup_button.click()
    assert sig.args == [CleanupPids((7,))]
    # a grown count replaces the row, the selection stays on the same finding
    view.set_findings([guard, fork, left])
    view.select("fork-with-threads")
    grown = Finding(**{**guard.to_dict(), "title": "child processes failed to start 9 time(s)",
                       "evidence": evidence({"failed starts": 9}).to_dict()})
    view.set_findings([grown, fork, left])
    assert view.current() == fork and rows() == [grown.title, fork.title, left.title]
    view.set_findings([fork])
    assert rows() == [fork.title] and view.current() == fork
    strip = FindingsStrip()
    qtbot.addWidget(strip)
    strip.set_findings([fork])
    assert "1 warning" in strip.head.text() and "#fff4cc" in strip.styleSheet()
    strip.fold_button.click()                               # folded to its head line
    assert strip.folded and strip.view.isHidden() and "Show details" in strip.fold_button.text()
    strip.set_findings([fork])
    assert strip.folded                                     # nothing new: stays folded
    strip.set_findings([grown, fork])
    assert not strip.folded and not strip.view.isHidden()   # a new problem unfolds it
    assert "1 error, 1 warning" in strip.head.text() and "#fde8ea" in strip.styleSheet()
    strip.set_findings([])
    assert strip.isHidden()


def test_missing_main_guard_in_the_strip_with_its_count_and_stop(qtbot, capsys, tmp_path):
    w = make_window(qtbot)
    _run(w, qtbot, SCRIPTS / "no_guard.py", "spawn")
    started_ns = w.controller.run.started_ns
    shown: dict[str, float] = {}

    def guard_shown() -> bool:
        if "missing-main-guard" in _codes(w) and "t" not in shown:
            shown["t"], shown["busy"] = time.time_ns(), w.controller.busy
        return "t" in shown

    qtbot.waitUntil(guard_shown, timeout=120_000)
    guard = next(f for f in w.live.findings.findings if f.code == "missing-main-guard")
    since_start = (shown["t"] - started_ns) / 1e9
    # shown live, while the run still sat there, at most a tick or two after the recorder saw it
    assert shown["busy"], "shown only after the run"
    assert (shown["t"] - guard.first_seen_ns) / 1e9 < 10, (since_start, guard.first_seen_ns)
    print(f"missing-main-guard in the strip {since_start:.1f} s after the run's start")
    strip = w.live.findings
    assert strip.isVisible() and "1 error" in strip.head.text()
    assert strip.view.current().code == "missing-main-guard"       # errors first, selected
    assert isinstance(guard.action, StopRun)
    # the count of failed starts is current: the pool keeps restarting workers, the strip follows
    first = guard.evidence.number("failed starts")
    assert first >= 1
    qtbot.waitUntil(lambda: strip.view.current().evidence.number("failed starts") > first, timeout=120_000)
    count = int(strip.view.current().evidence.number("failed starts"))
    assert f"failed starts {count}" in strip.view.detail.toPlainText()
    assert f"failed to start {count} time(s)" in strip.view.list.item(0).text()
    save_shot(w, "findings-main-guard.png", tmp_path)
    _stop(w, qtbot, strip.view.stop_button)                        # "Stop the run": the StopRun action
    assert w.last_result.status == "stopped"
    assert "missing-main-guard" in _codes(w) and not strip.view.stop_button.isVisible()
    # History: the past run shows the findings `gpuscope findings` lists
    run_id = w.last_result.run_id
    _open_past(w, qtbot, run_id)
    cli = call_json(capsys, "findings", run_id)["findings"]
    assert [f.to_dict() for f in w.live.findings.findings] == cli
    assert "missing-main-guard" in _codes(w) and w.live.findings.isVisible()


def test_fork_deadlock_strip_badges_stacks_and_apply_fix(qtbot, capsys, tmp_path):
    w = make_window(qtbot)
    _run(w, qtbot, DEADLOCK, "fork")
    main_pid = w.controller.run.pid
    qtbot.waitUntil(lambda: "fork-with-threads" in _codes(w), timeout=120_000)
    fork = next(f for f in w.live.findings.findings if f.code == "fork-with-threads")
    assert "lock-holder" in fork.title and fork.action == SetStartMethod("spawn")
    # the badge on the forking process's row (the rows fill from the sampler)
    qtbot.waitUntil(lambda: main_pid in w.tree.items and not w.tree.items[main_pid].icon(0).isNull(), timeout=30_000)
    assert "lock-holder" in w.tree.items[main_pid].toolTip(0)
    # looks stuck: no-progress, then its stacks in the Stacks tab by themselves
    qtbot.waitUntil(lambda: "no-progress" in _codes(w), timeout=180_000)
    assert _codes(w).index("fork-with-threads") < _codes(w).index("no-progress")
    qtbot.waitUntil(lambda: bool(w.stacks.groups) and w.bottom.currentWidget() is w.stacks, timeout=60_000)
    workers = next(g for g in w.stacks.groups if g.role == "pool worker")
    assert len(workers.members) == 2 and workers.who() == "2 pool workers"
    top = workers.thread.frames[0]
    assert (top.function, top.file, top.line) == ("child", str(DEADLOCK), 16)
    card = next(c for c in w.stacks.card_widgets if "2 pool workers" in c.title.text())
    assert "fork_deadlock.py:16" in card.body.text() and "with LOCK:" in card.body.text()
    assert "waiting to acquire a lock" in card.title.text()
    holder = next(c for c in w.stacks.card_widgets if "lock-holder" in c.title.text())
    assert "sleeping" in holder.title.text() and "fork_deadlock.py:12" in holder.body.text()
    assert {"MainThread", "lock-holder"} <= {g.thread.name for g in w.stacks.groups if g.role == "main"}
    # clicking the badged row selects its finding in the strip
    strip = w.live.findings.view
    strip.select("no-progress")
    w.tree.itemClicked.emit(w.tree.items[main_pid], 0)
    assert strip.current().code == "fork-with-threads"
    w.bottom.setCurrentWidget(w.tree)
    save_shot(w, "findings-strip.png", tmp_path)
    w.bottom.setCurrentWidget(w.stacks)
    w.live.findings.fold_button.click()                       # the strip folded to its head line
    w.live.parentWidget().setSizes([360, 400])               # room for the cards (the splitter of the Run tab)
    save_shot(w, "stacks-view.png", tmp_path)
    w.live.findings.fold_button.click()
    # "Take stacks now" while it hangs: the same picture, taken again
    before = w.stacks.head.text()
    qtbot.mouseClick(w.stacks.take_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.stacks.take_button.isEnabled() and w.stacks.head.text() != before, timeout=60_000)
    again = next(g for g in w.stacks.groups if g.role == "pool worker")
    assert again.thread.frames[0] == top
    # "Apply to next run" of the SetStartMethod fix sets the launch panel's start method
    assert w.panel.method.currentData() == "fork"
    strip.select("fork-with-threads")
    qtbot.mouseClick(strip.apply_button, Qt.MouseButton.LeftButton)
    assert w.panel.method.currentData() == "spawn" and w.tabs.currentIndex() == 0
    strip.select("no-progress")
    _stop(w, qtbot, strip.stop_button)
    assert w.last_result.status == "stopped"
    assert {"fork-with-threads", "no-progress"} <= set(_codes(w))
    # History: the findings of `gpuscope findings`, and the stacks taken while it hung
    run_id = w.last_result.run_id
    _open_past(w, qtbot, run_id)
    cli = call_json(capsys, "findings", run_id)["findings"]
    assert [f.to_dict() for f in w.live.findings.findings] == cli
    assert any(g.role == "pool worker" and g.thread.frames[0] == top for g in w.stacks.groups)
    assert "the run has ended" in w.stacks.head.text() and not w.stacks.take_button.isEnabled()
    # Run → Take stacks of a run that has ended: the last ones taken, read again
    w.stacks.clear()
    w.findings.stacks_action.trigger()
    qtbot.waitUntil(lambda: bool(w.stacks.groups), timeout=30_000)
    assert "the run has ended" in w.stacks.head.text() and w.bottom.currentWidget() is w.stacks


def test_stacks_view_says_how_a_process_the_hook_did_not_reach_was_read(qtbot, monkeypatch, tmp_path):
    """A process without gpuscope's hook (here `sleep`, not Python): its card says why it has no stack,
    as read_from_outside found it (py-spy's error when installed, "neither … installed" when not)."""
    import subprocess

    from gpuscope.app.run.qt_stacks import QtStacks
    from gpuscope.findings import stacks

    view = QtStacks()
    qtbot.addWidget(view)
    tool = stacks.outside_tool()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        got = stacks.dump_processes(tmp_path, {sleeper.pid: "not injected"}, timeout_s=1.0)
        monkeypatch.setenv("PATH", str(tmp_path))              # neither py-spy nor pystack on PATH
        without = stacks.dump_processes(tmp_path, {sleeper.pid: "not injected"}, timeout_s=1.0)
    finally:
        sleeper.kill()
        sleeper.wait()
    view.show_stacks(got + [stacks.ProcessStacks(sleeper.pid + 1, "pool worker", [], "none", "")], 1, live=True)
    card = view.card_widgets[-2] if len(view.card_widgets) > 1 else view.card_widgets[0]
    assert f"pid {sleeper.pid}" in card.title.text()
    if tool is None:
        assert "neither py-spy nor pystack is installed" in card.body.text()
    else:
        assert f"{tool[0]}" in card.body.text() and "\n" not in card.body.text()
    view.show_stacks(without, 1, live=True)
    assert [c for c in view.card_widgets if "neither py-spy nor pystack is installed" in c.body.text()]
    assert "Stacks of 1 process(es), 0 thread(s)" in view.head.text()
