"""py-spy's samples of an attached run as timeline lanes: real processes, real py-spy."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gpuscope.attach import profile
from tests.attach.helpers import end_tree

BUSY = """
import time
print("ready", flush=True)
def alpha_spin():
    t = time.monotonic()
    while time.monotonic() - t < 0.2:
        pass
def beta_spin():
    t = time.monotonic()
    while time.monotonic() - t < 0.2:
        pass
while True:
    alpha_spin()
    beta_spin()
"""


def _start(tmp_path: Path) -> subprocess.Popen[str]:
    script = tmp_path / "busy.py"
    script.write_text(BUSY)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _attach(run_env: dict[str, str], pid: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], env=run_env, capture_output=True, text=True,
                          timeout=120)


def test_the_lane_names_the_two_functions_inside_the_profile_window(tmp_path):
    job = _start(tmp_path)
    try:
        before = time.monotonic_ns()
        prof = profile.record(job.pid, 2, str(tmp_path / "profile.speedscope.json"), {job.pid: "main"})
        after = time.monotonic_ns()
    finally:
        end_tree(job)
    assert prof.samples > 0, prof.note
    assert json.loads(Path(prof.path).read_text())["$schema"].startswith("https://www.speedscope.app")  # still kept
    assert prof.timeline == str(tmp_path / "profile.chrometrace.json")
    sampled = profile.read_ranges(prof.timeline)
    assert sampled is not None
    assert before <= sampled.start_mono_ns <= sampled.end_mono_ns <= after
    mine = [r for r in sampled.ranges if r.pid == job.pid]
    names = {r.name for r in mine}
    assert {"alpha_spin", "beta_spin"} <= names, names
    assert all(sampled.start_mono_ns <= r.start_ns <= r.end_ns <= sampled.end_mono_ns for r in sampled.ranges)
    spins = sorted((r for r in mine if r.name.endswith("_spin")), key=lambda r: r.start_ns)
    assert {r.depth for r in spins} == {1}                       # under <module>, no process frame counted
    assert any(a.name != b.name for a, b in zip(spins, spins[1:]))   # the loop alternates: one range per turn
    assert all(not r.name.startswith("process ") for r in sampled.ranges)


def test_report_json_and_the_app_report_of_an_attached_run_show_the_lanes(tmp_path, run_env, qtbot):
    from gpuscope import api
    from gpuscope.trace import timeline as T
    from gpuscope.views import timeline_lod

    job = _start(tmp_path)
    try:
        got = _attach(run_env, job.pid, "attach", str(job.pid), "--duration", "3", "--profile", "2", "--json")
    finally:
        end_tree(job)
    assert got.returncode == 0, got.stderr
    run_id = [json.loads(ln) for ln in got.stdout.splitlines() if ln.startswith("{")][-1]["run_id"]
    perfetto_out = tmp_path / "trace.json"
    rep = _attach(run_env, 0, "report", run_id, "--json", "--perfetto", str(perfetto_out))
    assert rep.returncode == 0, rep.stderr
    exported = json.loads(perfetto_out.read_text())
    exported = exported["traceEvents"] if isinstance(exported, dict) else exported
    assert {"alpha_spin", "beta_spin"} <= {str(e.get("name")).split(" (")[0] for e in exported
                                           if e.get("cat") == "cpu samples" and e.get("pid") == job.pid}
    tl_json = json.loads(rep.stdout)["timeline"]
    lane = next(ln for ln in tl_json["lanes"] if ln["pid"] == job.pid)
    assert {"alpha_spin", "beta_spin"} <= {r["name"] for r in lane["ranges"]}
    assert all(tl_json["start_ns"] <= r["start_ns"] <= r["end_ns"] <= tl_json["end_ns"] for r in lane["ranges"])

    run_dir = Path(run_env["GPUSCOPE_HOME"]) / "runs" / run_id
    report = api.load_report(run_dir)
    tl = report.timeline
    mine = (tl.ranges.source == T.SOURCE_PYSPY) & (tl.ranges.pid == job.pid)
    shown = {str(tl.name(int(i))) for i in tl.ranges.name_id[mine]}
    assert {"alpha_spin", "beta_spin"} <= {s.split(" (busy.py:")[0] for s in shown}, shown
    assert (tl.ranges.start_ns[mine] >= 0).all() and (tl.ranges.end_ns[mine] <= tl.duration_ns).all()
    labels = [ln.label for ln in timeline_lod.nvtx_lanes(tl)[job.pid]]
    assert labels and all(lb.endswith("cpu samples") for lb in labels), labels

    from gpuscope.app.report.qt_report_view import QtReportView    # the Report tab, as History opens it

    view = QtReportView()
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.sigLoaded, timeout=60_000):
        view.show_run(run_dir)
    shown = [ln for b in view.timeline.layout_model.processes for ln in b.lanes if ln.source == T.SOURCE_PYSPY]
    assert {ln.pid for ln in shown} == {job.pid} and all(ln.label.endswith("cpu samples") for ln in shown)


def test_an_attached_run_without_a_profile_still_opens(tmp_path, run_env):
    from gpuscope import api

    job = _start(tmp_path)
    try:
        got = _attach(run_env, job.pid, "attach", str(job.pid), "--duration", "1", "--json")
    finally:
        end_tree(job)
    assert got.returncode == 0, got.stderr
    run_id = [json.loads(ln) for ln in got.stdout.splitlines() if ln.startswith("{")][-1]["run_id"]
    rep = _attach(run_env, 0, "report", run_id, "--json")
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["timeline"] is None
    report = api.load_report(Path(run_env["GPUSCOPE_HOME"]) / "runs" / run_id)
    assert len(report.timeline.ranges) == 0 and "without a profile" in report.notes[0]


FORK_POOL = """
import multiprocessing as mp, time
def alpha_spin(i):
    t = time.monotonic()
    while time.monotonic() - t < 0.2:
        pass
    return i
if __name__ == "__main__":
    mp.set_start_method("fork")
    with mp.Pool(2) as pool:
        print("ready", flush=True)
        while True:
            pool.map(alpha_spin, range(2))
"""


def test_forked_workers_sharing_a_thread_handle_each_get_their_own_stacked_lane(tmp_path):
    script = tmp_path / "pool.py"
    script.write_text(FORK_POOL)
    job = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert job.stdout is not None and job.stdout.readline().strip() == "ready"
        prof = profile.record(job.pid, 2, str(tmp_path / "profile.speedscope.json"), {})
    finally:
        end_tree(job)
    sampled = profile.read_ranges(prof.timeline)
    assert sampled is not None
    workers = {r.pid for r in sampled.ranges if r.name == "alpha_spin"}
    assert len(workers) == 2, workers
    for pid in workers:
        spins = [r for r in sampled.ranges if r.pid == pid and r.name == "alpha_spin"]
        assert len({r.depth for r in spins}) == 1, spins      # one stack shape per worker
    rows: dict[tuple[int, int, int], list[profile.SampledRange]] = {}
    for r in sampled.ranges:
        rows.setdefault((r.pid, r.tid, r.depth), []).append(r)
    for key, rs in rows.items():     # a lane's row never overlaps itself
        rs.sort(key=lambda r: r.start_ns)
        assert all(a.end_ns <= b.start_ns for a, b in zip(rs, rs[1:])), key
