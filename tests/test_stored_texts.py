"""What gpuscope stores as text stays that text: a run's status is written to the store and to
JSON as its value (kept from the tests of a former stand-in for enum)."""

from __future__ import annotations

import json
import pickle
import sqlite3

from gpuscope.status import RunStatus


def test_run_statuses_keep_their_members_and_texts():
    assert [(m.name, m.value) for m in RunStatus] == [
        ("RUNNING", "running"), ("EXITED", "exited"), ("FAILED", "failed"), ("STOPPED", "stopped"), ("ERROR", "error")]
    assert [m for m in RunStatus if m.final] == [RunStatus.EXITED, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.ERROR]
    assert RunStatus("stopped") is RunStatus.STOPPED and f"{RunStatus.EXITED}" == str(RunStatus.EXITED) == "exited"


def test_a_status_is_stored_and_written_as_its_text():
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (s TEXT)")
        conn.execute("INSERT INTO t VALUES (?)", (RunStatus.FAILED,))
        assert conn.execute("SELECT s, typeof(s) FROM t").fetchone() == ("failed", "text")
    assert json.dumps({"status": RunStatus.STOPPED, RunStatus.EXITED: [RunStatus.ERROR]}) == \
        '{"status": "stopped", "exited": ["error"]}'
    assert pickle.loads(pickle.dumps(RunStatus.RUNNING)) is RunStatus.RUNNING
