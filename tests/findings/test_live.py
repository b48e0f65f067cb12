"""Issue 12's acceptance, live: a real run driven through the recorder lifecycle (tests/findings/live.py).

- a fork pool deadlocked on a lock a parent thread holds: ``fork-with-threads`` at fork time,
  ``no-progress`` after 10 s idle with the stacks, and ``gpuscope stacks --latest --json`` shows
  the worker's frame in the script's function with file and line;
- a spawn pool without the main guard: ``missing-main-guard`` within 10 s of the first failed
  start, with the count; the run is then stopped, and ``gpuscope findings`` has it.
"""

from __future__ import annotations

import json

from gpuscope.fix import StopRun
from tests.findings.cli import call, call_json
from tests.findings.live import SCRIPTS, run_live
from tests.runs.helpers import pid_alive

DEADLOCK = SCRIPTS / "fork_deadlock.py"


def _has(code):
    return lambda found: any(f.code == code for f in found)


def test_fork_deadlock_fork_with_threads_then_no_progress_then_stacks(capsys):
    stacks_json: dict = {}

    def take_stacks(run):                      # while the run is still stuck: the command as a user runs it
        # --timeout 20: on the shared 2-core machine (load ~40) a stuck process may wait seconds for a CPU
        stacks_json.update(call_json(capsys, "stacks", "--latest", "--timeout", "20"))
        stacks_json["text"] = call(capsys, "stacks", run.run_id, "--timeout", "20")[1]

    live = run_live(DEADLOCK, timeout_s=240, until=_has("no-progress"), during=take_stacks)
    codes = [f.code for f in live.findings]
    assert codes.index("fork-with-threads") < codes.index("no-progress"), codes
    fork = next(f for f in live.findings if f.code == "fork-with-threads")
    assert "lock-holder (holder)" in fork.title and fork.action.method == "spawn"
    stuck = next(f for f in live.findings if f.code == "no-progress")
    assert 10 <= stuck.evidence.number("idle s") < 15, stuck.evidence       # fired once idle reached 10 s
    assert any("child (fork_deadlock.py:16)" in line and line.startswith("2 pool workers")
               for line in stuck.evidence.excerpts), stuck.evidence.excerpts
    assert isinstance(stuck.action, StopRun)
    # gpuscope stacks --latest --json, taken while it hung
    workers = [p for p in stacks_json["processes"] if p["role"] == "pool worker"]
    assert stacks_json["live"] and len(workers) == 2
    for w in workers:
        top = w["threads"][0]["frames"][0]
        assert (top["function"], top["file"], top["line"]) == ("child", str(DEADLOCK), 16)
    main = next(p for p in stacks_json["processes"] if p["role"] == "main")
    names = {t["name"] for t in main["threads"]}
    assert {"MainThread", "lock-holder"} <= names
    assert "2 pool workers (MainThread): child (fork_deadlock.py:16)" in stacks_json["text"]
    # the signal never ended a process: the run was stopped by us, not by a dump
    assert live.result.status == "stopped"
    assert not [p for p in live.result.processes if p.pid and pid_alive(p.pid)]
    # after the run: the saved findings and the command agree
    saved = json.loads((live.run_dir / "findings.json").read_text())
    assert {"fork-with-threads", "no-progress"} <= {f["code"] for f in saved["findings"]}
    after = call_json(capsys, "findings", live.run_id)
    assert {"fork-with-threads", "no-progress"} <= {f["code"] for f in after["findings"]}


def _until_text(path, text: bytes, times: int, timeout_s: float = 60.0) -> int:
    """Wait until ``text`` is in the file ``times`` times (or the time is up); return the count."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        count = path.read_bytes().count(text) if path.exists() else 0
        if count >= times or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def test_missing_main_guard_within_10_s_of_the_first_failure(capsys):
    live = run_live(SCRIPTS / "no_guard.py", start_method="spawn", timeout_s=180,
                    until=lambda found: any(f.code == "missing-main-guard" and f.evidence.number("failed starts") >= 1
                                            for f in found),
                    # before Stop: let a second failed start reach stderr (the pool restarts its
                    # workers forever), so the final count shows the rule keeps counting
                    during=lambda run: _until_text(run.run_dir / "stderr.log", b"bootstrapping phase", 2))
    guard = next(f for f in live.findings if f.code == "missing-main-guard")
    assert guard.severity == "error" and isinstance(guard.action, StopRun)
    assert "no_guard.py" in guard.title and "bootstrapping phase" in "\n".join(guard.evidence.excerpts)
    # seen as soon as the first child's traceback reached stderr
    assert live.first_stderr_s is not None and live.seen_at["missing-main-guard"] - live.first_stderr_s < 10
    assert live.result.status == "stopped"
    assert live.during >= 2, "the pool did not restart its failing workers within 60 s"
    final = next(f for f in live.final if f.code == "missing-main-guard")
    assert final.evidence.number("failed starts") >= 2                    # the pool kept restarting them
    assert final.first_seen_ns == guard.first_seen_ns
    code, out, _ = call(capsys, "findings", live.run_id)
    assert code == 0 and "error [missing-main-guard]" in out and "failed starts" in out
