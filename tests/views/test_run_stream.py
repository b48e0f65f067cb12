"""A run's stream without Qt: real threads fill it while the front end drains it."""

from __future__ import annotations

import threading

from gpuscope.views.run_stream import JOIN_BYTES, MAX_PENDING_LINES, RunStream


def test_output_from_threads_is_kept_whole_and_in_order_per_stream():
    s = RunStream()

    def pump(stream: str) -> None:
        for i in range(2000):
            s.on_output(stream, b"%s %d\n" % (stream.encode(), i))

    threads = [threading.Thread(target=pump, args=(name,)) for name in ("stdout", "stderr")]
    for t in threads:
        t.start()
    got: dict[str, bytes] = {"stdout": b"", "stderr": b""}
    while any(t.is_alive() for t in threads):
        for stream, chunk, _ in s.drain_output()[0]:
            got[stream] += bytes(chunk)
    for t in threads:
        t.join()
    for stream, chunk, _ in s.drain_output()[0]:
        got[stream] += bytes(chunk)
    for name in got:
        assert got[name].splitlines() == [b"%s %d" % (name.encode(), i) for i in range(2000)]


def test_a_flood_is_bounded_and_says_what_it_dropped():
    s = RunStream()
    for _ in range(3 * MAX_PENDING_LINES):
        s.on_output("stdout", b"x" * 100 + b"\n")
    chunks, dropped = s.drain_output()
    kept = sum(n for _, _, n in chunks)
    assert kept < MAX_PENDING_LINES + 2000 and all(len(c) <= JOIN_BYTES + 101 for _, c, _ in chunks)
    assert dropped["stdout"][1] + kept == 3 * MAX_PENDING_LINES and dropped["stdout"][2] is False
    assert s.drain_output() == ([], {})


def test_findings_batches_and_progress_are_drained_once():
    s = RunStream()
    s.on_finding("f1")
    s.on_batch("b1")
    s.on_progress("importing")
    assert (s.drain_findings(), s.drain_batches(), s.drain_progress()) == (["f1"], ["b1"], ["importing"])
    assert (s.drain_findings(), s.drain_batches(), s.drain_progress()) == ([], [], [])
