"""The façade the app and the CLI use, with real runs: a run's stream carries its output and
telemetry, the run is then in the history, opens as a past run, and a series is recorded."""

from __future__ import annotations

import sys
import textwrap

from gpuscope import api
from gpuscope.spec import RunSpec
from gpuscope.status import RunStatus

SCRIPT = textwrap.dedent("""
    import multiprocessing as mp, sys, time

    def work(i):
        return i * i

    if __name__ == "__main__":
        print("hello from the program", flush=True)
        ctx = mp.get_context(sys.argv[1]) if len(sys.argv) > 1 else mp   # no argument: gpuscope's choice
        pool = ctx.Pool(2)
        print("squares", pool.map(work, range(4)), flush=True)
        # close and join, not the with block's terminate(): a worker still starting when the tasks
        # are done (one worker can take all four under load) would be killed before it says its role
        pool.close()
        pool.join()
        time.sleep(0.5)
""")


def _script(tmp_path):
    path = tmp_path / "pool_api.py"
    path.write_text(SCRIPT)
    return path


def test_a_run_streams_its_output_and_is_then_in_the_history(tmp_path):
    spec = RunSpec(script=str(_script(tmp_path)), args=("spawn",), python=sys.executable, start_method="spawn")
    stream = api.RunStream()
    run = api.start_run(spec, stream)
    result = run.wait()
    assert result.status is RunStatus.EXITED, result
    out = b"".join(bytes(chunk) for name, chunk, _ in stream.drain_output()[0] if name == "stdout")
    assert b"hello from the program" in out and b"squares [0, 1, 4, 9]" in out
    assert stream.drain_batches(), "no telemetry batch reached the stream"
    listed = api.history()
    assert [r.id for r in listed.rows] == [result.run_id] and listed.sizes[result.run_id] > 0
    past = api.open_past_run(result.run_id, result.run_dir, result.started_ns)
    assert past.run_id == result.run_id and any(b"squares" in data for _, data in past.output)
    roles = sorted(i.role for i in past.identities.values() if i.role)
    assert roles.count("pool worker") == 2, roles
    assert api.load_report(result.run_dir).timeline is not None
    assert api.delete_runs([result.run_id])[0] == 1 and api.history().rows == []


def test_a_series_runs_each_method_and_compares_them(tmp_path):
    spec = RunSpec(script=str(_script(tmp_path)), python=sys.executable)
    stream, seen = api.RunStream(), []
    series, run = api.compare_series(spec, ["fork", "spawn"], 1, stream,
                                     progress=lambda i, n, method, rep: seen.append((i, n, method, rep)))
    comparison = run()
    assert seen == [(1, 2, "fork", 1), (2, 2, "spawn", 1)]
    assert sorted(comparison.labels) == ["fork", "spawn"] and all(len(v) == 1 for v in series.runs.values())
    again = api.compare_runs([r for ids in series.runs.values() for r in ids])
    assert sorted(again.labels) == ["fork", "spawn"]
