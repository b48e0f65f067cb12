"""The console under a flood of output, and Follow (issue 16, parts 1 and 7).

The GUI thread never waits on output: a program logging a million lines leaves the window
responsive (a 10 ms timer's lateness measures the GUI thread's stalls), the run clock keeps
ticking, and the header's "exited m:ss" is the run's own duration. Lines stay whole through the
skipping a flood needs, and the skip note says where all of the output is. Follow: a search turns
it off, the next run starts with it on, ticking it shows the end.
"""

from __future__ import annotations

import re
import time

import pytest
from apphelpers import fill, make_window, wait_report
from PySide6.QtCore import Qt, QTimer

from gpuscope.app.run.qt_console import QtConsole
from gpuscope.app.run.qt_live_view import format_elapsed

pytestmark = pytest.mark.gui

FLOOD_LINES = 1_000_000
# about freezing, far above a loaded machine's pauses (the old console froze for the whole flood);
# the stall figures belong in benchmarks
STALL_BOUND_S = 5.0


class StallMeter:
    """A 10 ms timer on the GUI thread: how late each beat is, and the run clock it saw."""

    def __init__(self, window) -> None:
        self.w = window
        self.beats: list[tuple[float, float]] = []      # (time, gap since the previous beat)
        self.clock: list[str] = []      # the run clock's texts, in the order seen
        self.last = time.monotonic()
        self.timer = QTimer(interval=10)
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self.beat)

    def beat(self) -> None:
        now = time.monotonic()
        self.beats.append((now, now - self.last))
        self.last = now
        text = self.w.live.elapsed.text()
        if not self.clock or self.clock[-1] != text:
            self.clock.append(text)

    def longest(self, since: float, until: float) -> float:
        return max((gap for t, gap in self.beats if since < t - gap and t <= until), default=0.0)


def test_flood_of_output_never_freezes_the_window(qtbot):
    w = make_window(qtbot)
    w.bottom.setCurrentWidget(w.console)
    fill(w, "log_flood.py", str(FLOOD_LINES), "default")
    meter = StallMeter(w)
    started: list[float] = []
    w.controller.sigStarted.connect(lambda run: started.append(time.monotonic()))
    meter.timer.start()
    with qtbot.waitSignal(w.controller.sigEnded, timeout=240_000) as ended:
        w.panel.run_button.click()
    end = time.monotonic()
    meter.timer.stop()
    result = ended.args[0]
    assert result.status == "exited"
    duration = (result.ended_ns - result.started_ns) / 1e9
    longest = meter.longest(started[0], end)
    gaps = sorted(gap for _, gap in meter.beats)
    # the GUI thread kept serving its timer while a million lines came in
    assert longest < STALL_BOUND_S, f"the GUI thread stalled {longest:.2f} s (beats {len(gaps)}, p95 " \
                                    f"{gaps[int(len(gaps) * 0.95)]:.3f} s, run {duration:.1f} s)"
    # the run clock ticked during the flood, forward only (a frozen window shows one second throughout)
    second = {f"running {format_elapsed(s)}": s for s in range(int(duration) + 2)}
    seen = [second[text] for text in meter.clock if text in second]
    assert seen == sorted(seen) and len(set(seen)) >= min(2, int(duration)), meter.clock
    # the header says the run's own duration, not when the GUI got round to it
    assert w.live.elapsed.text() == f"exited {format_elapsed(duration)}"
    assert w.controller.elapsed() == pytest.approx(duration)
    w.tick()
    console = w.console
    assert console.lines_seen >= FLOOD_LINES and console.lines_skipped > 0
    text = console.plain_text()
    # the end is shown (the stdout line may arrive before the last stderr lines, through its own pipe,
    # and be skipped among them: it is in stdout.log)
    assert f"log {FLOOD_LINES - 1} of the flood" in text
    assert text.count("\n") <= console.max_lines + 1                    # a bounded scrollback
    run_dir = str(result.run_dir)
    assert f"lines skipped here (output flood); all of them are in {run_dir}/stdout.log" in text
    assert "of 1,0" in console.kept.text() and f'{result.run_dir}">run folder</a>' in console.kept.text()
    # whole lines only: every line is the program's, complete, or a note of gpuscope's on its own
    line = re.compile(r"(log \d+ of the flood: a warning line as logging writes them|out last \d+"
                      r"|\[gpuscope: .*\]|gpuscope: .*)")
    bad = [s for s in text.splitlines() if not line.fullmatch(s)]
    assert not bad, bad[:5]
    wait_report(qtbot, w, timeout=120_000)


def test_skipping_keeps_lines_whole_and_resumes_at_a_line_start(qtbot):
    console = QtConsole(max_lines=1000, per_tick=50)
    qtbot.addWidget(console)
    console.set_log_folder("/runs/r1")
    # the bridge dropped the end of a stderr line: stderr resumes at its next line
    console.append_chunks([("stdout", b"first half of a line ")])
    console.append_chunks([("stderr", b"tail of a cut line\nerr kept\n", 2), ("stdout", b"second half\n")],
                          {"stderr": (1000, 40, True)})
    lines = console.plain_text().splitlines()
    assert lines == ["[gpuscope: 40 lines skipped here (output flood); all of them are in "
                     "/runs/r1/stdout.log and stderr.log]", "err kept", "first half of a line second half"]
    # far more than the console shows at once: the oldest are skipped, never half a line
    flood = b"".join(b"line %d\n" % i for i in range(5000)) + b"unfinished"
    console.append_chunks([("stdout", flood[i:i + 777]) for i in range(0, len(flood), 777)])
    console.append_text("gpuscope: the end")
    lines = console.plain_text().splitlines()
    assert lines[-2:] == ["unfinished", "gpuscope: the end"] and lines[-3] == "line 4999"
    at = [i for i, s in enumerate(lines) if s.startswith("line ")]
    shown = [int(lines[i].split()[1]) for i in at]
    assert shown == sorted(set(shown)) and shown[-1] == 4999 and shown[0] > 0    # the newest, in order, whole
    assert any(s.startswith("[gpuscope: ") and "lines skipped here" in s for s in lines[3:at[0]])
    # a frame that showed a batch before the rest was skipped (a loaded machine) leaves a gap:
    # a note says so there too
    for (i, a), (j, b) in zip(zip(at, shown), zip(at[1:], shown[1:])):
        assert b == a + 1 or any("lines skipped here" in s for s in lines[i + 1:j]), (a, b)
    assert console.lines_skipped == 40 + 5000 - len(shown)


def test_bridge_keeps_a_bounded_tail_and_says_what_it_dropped(qtbot):
    from gpuscope.app.bridge import RunBridge
    from gpuscope.views.run_stream import MAX_PENDING_LINES

    bridge = RunBridge()
    lines = [b"line %d\n" % i for i in range(100_000)]
    for i in range(0, len(lines), 100):
        bridge.on_output("stdout", b"".join(lines[i:i + 100]))
    bridge.on_output("stderr", b"half a line")
    chunks, dropped = bridge.drain_output()
    kept = sum(c[2] for c in chunks)
    assert MAX_PENDING_LINES <= kept < MAX_PENDING_LINES + 2000 and len(chunks) < 100   # joined, bounded
    assert dropped["stdout"][1] + kept == 100_000 and not dropped["stdout"][2]
    assert b"".join(bytes(c[1]) for c in chunks if c[0] == "stdout").endswith(b"line 99999\n")
    assert bridge.drain_output() == ([], {})


def test_a_search_turns_follow_off_the_next_run_starts_following(qtbot):
    w = make_window(qtbot)
    w.bottom.setCurrentWidget(w.console)
    console = w.console
    fill(w, "flood.py", "3000", "default")
    with qtbot.waitSignal(w.controller.sigEnded, timeout=90_000):
        w.panel.run_button.click()
    bar = console.text.verticalScrollBar()
    assert console.follow.isChecked() and bar.maximum() > 0 and bar.value() == bar.maximum()
    first = re.search(r"line \d+ of the flood", console.plain_text()).group(0)   # the oldest line kept
    console.search.setText(first)
    assert console.find_next()
    assert not console.follow.isChecked() and bar.value() < bar.maximum()      # the match is in view
    wait_report(qtbot, w, timeout=60_000)
    seen: list[bool] = []             # Follow as the next run's output arrives
    real_insert = console._insert

    def watching_insert(pieces):
        seen.append(console.follow.isChecked())
        real_insert(pieces)

    console._insert = watching_insert
    with qtbot.waitSignal(w.controller.sigEnded, timeout=90_000):
        w.panel.run_button.click()
    w.tick()
    assert seen and all(seen), "the next run did not start following"
    assert "line 2999 of the flood" in console.plain_text()
    assert bar.value() == bar.maximum()
    wait_report(qtbot, w, timeout=60_000)


def test_ticking_follow_jumps_to_the_end(qtbot):
    console = QtConsole()
    qtbot.addWidget(console)
    console.resize(800, 300)
    console.show()
    console.append_chunks([("stdout", b"".join(b"line %d\n" % i for i in range(400)))])
    bar = console.text.verticalScrollBar()
    console.search.setText("line 3\n"[:-1])
    assert console.find_next() and not console.follow.isChecked()
    console.append_chunks([("stdout", b"".join(b"more %d\n" % i for i in range(300)))])
    assert bar.value() < bar.maximum()                # not following: the view stays at the match
    console.follow.click()                            # as a user ticks it
    assert console.follow.isChecked() and bar.value() == bar.maximum()
    console.append_chunks([("stdout", b"newest\n")])
    assert bar.value() == bar.maximum()


def test_a_progress_bar_updates_its_line_and_a_huge_line_is_cut(qtbot):
    from gpuscope.app.run.qt_console import MAX_LINE_CHARS

    console = QtConsole()
    qtbot.addWidget(console)
    console.append_chunks([("stdout", b"epoch 1\n"), ("stderr", b"\r 10%|#    |")])
    console.append_chunks([])                        # an unfinished line is shown after one tick
    assert console.plain_text() == "epoch 1\n 10%|#    |"
    console.append_chunks([("stderr", b"\r 20%|##   |\r 30%|###  |")])
    console.append_chunks([])
    assert console.plain_text() == "epoch 1\n 30%|###  |"      # updated in place, not appended
    console.append_chunks([("stderr", b"\r100%|#####|\r\n"), ("stdout", b"epoch 2\n")])
    assert console.plain_text().splitlines() == ["epoch 1", "100%|#####|", "epoch 2"]
    console.append_chunks([("stdout", b"x" * 1_000_000 + b"\nafter\n")])   # one 1 MB line
    lines = console.plain_text().splitlines()
    assert lines[-1] == "after" and lines[-2].startswith("x" * MAX_LINE_CHARS)
    assert len(lines[-2]) < MAX_LINE_CHARS + 100 and "line cut here" in lines[-2]
    console.append_chunks([("stdout", b"y" * 30_000)])              # an open line stays cut too
    console.append_chunks([])
    console.append_chunks([("stdout", b"y" * 30_000 + b"\n")])
    assert len(console.plain_text().splitlines()[-1]) < MAX_LINE_CHARS + 100
