"""Traces as gpuscope run records them (torch/rank<R>-<pid>[.c<k>].json.gz + .meta.json, the run's
notes), a schedule's cycles joined per process, gpuscope's clock markers out of the tables, the
Perfetto export's torch events, and the rules' cheap test importing no numpy."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

from gpuscope.torchtrace.ops import key_averages
from gpuscope.torchtrace.perfetto import events as perfetto_events
from gpuscope.torchtrace.reader import read_trace
from gpuscope.torchtrace.report import to_json, torch_ops

OFFSET_NS = -123_456_789


def _gpuscope_layout(ddp_cycles: Path, run: Path) -> None:
    """cycle0 and cycle1 of each rank under gpuscope's names, a clock marker added to each trace."""
    (run / "torch").mkdir(parents=True)
    for k, cycle in enumerate(("cycle0", "cycle1"), start=1):
        for p in sorted((ddp_cycles / cycle).glob("*.pt.trace.json.gz")):
            rank, pid = int(p.name[4]), int(p.name.split(".")[1])
            stem = f"rank{rank}-{pid}" + ("" if k == 1 else f".c{k}")
            doc = json.loads(gzip.decompress(p.read_bytes()))
            first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
            doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "gpuscope:clock 1", "pid": pid,
                                       "tid": pid, "ts": first, "dur": 0.5, "args": {"External id": 0}})
            (run / "torch" / f"{stem}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
            (run / "torch" / f"{stem}.meta.json").write_text(json.dumps(
                {"pid": pid, "rank": rank, "clock_offset_ns": OFFSET_NS, "clock_uncertainty_ns": 20_000}))
    (run / "summary.json").write_text(json.dumps({"notes": [
        "torch profiler: rank 2 (pid 77) lost its trace: killed by SIGKILL"]}))


def test_cycles_joined_markers_hidden_lost_noted(ddp_cycles, tmp_path):
    run = tmp_path / "run"
    _gpuscope_layout(ddp_cycles, run)
    doc = to_json(torch_ops(run))
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["problems"] == ["rank 2 (pid 77) lost its trace: killed by SIGKILL"]
    assert all(not op["name"].startswith("gpuscope:") for r in doc["ranks"] for op in r["ops"])
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3, 5, 6, 7]   # both cycles' steps
    assert all(r["clock"]["offset_ns"] == OFFSET_NS and r["clock"]["uncertainty_ns"] == 20_000
               for r in doc["ranks"])
    # the joined table counts both cycles: the sum of the two traces' own tables
    one = {r.name: r.count for r in key_averages(read_trace(next((ddp_cycles / "cycle0").glob("rank0*.gz"))))}
    two = {r.name: r.count for r in key_averages(read_trace(next((ddp_cycles / "cycle1").glob("rank0*.gz"))))}
    ops = {op["name"]: op["count"] for op in doc["ranks"][0]["ops"]}
    assert ops["aten::addmm"] == one["aten::addmm"] + two["aten::addmm"]


def test_perfetto_events_on_the_timeline_clock(ddp_cycles, tmp_path):
    p = next((ddp_cycles / "cycle0").glob("rank0*.gz"))
    tr = read_trace(p, clock_offset_ns=OFFSET_NS, clock_uncertainty_ns=1000)
    mono_base = int(tr.cols["ts_ns"].min()) - 5_000
    lines = [json.loads(x) for x in perfetto_events([tr], wall_base_ns=None, mono_base_ns=mono_base)]
    xs = [e for e in lines if e["ph"] == "X"]
    raw = json.loads(gzip.decompress(p.read_bytes()))["traceEvents"]
    assert len(xs) == sum(e.get("ph") == "X" and isinstance(e.get("pid"), int) for e in raw)
    assert min(float(e["ts"]) for e in xs) == 5.0          # microseconds after the timeline's zero
    assert {e["pid"] for e in lines} == {tr.pid}
    assert any(e["ph"] == "M" and e["args"]["name"].startswith("torch ") for e in lines)
    skipped: list[str] = []
    assert list(perfetto_events([tr], wall_base_ns=1, mono_base_ns=None, skipped=skipped)) == []
    assert skipped and str(p) in skipped[0]


def test_rules_applies_imports_no_numpy(ddp_cycles, tmp_path):
    run = tmp_path / "run"
    (run / "torch").mkdir(parents=True)
    shutil.copy(next((ddp_cycles / "cycle0").glob("rank0*.gz")), run / "torch" / "rank0-1.json.gz")
    code = ("import sys\nfrom gpuscope.findings.registry import RunInputs\n"
            "from gpuscope.findings import torch_ops_rules as T\n"
            f"assert T._has_traces(RunInputs({str(run)!r}))\nprint('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_perfetto_write_takes_the_torch_events(ddp_cycles):
    """trace/perfetto.write(extra=...) puts the torch events in the same document (an empty
    timeline here: the nsys part has its own tests)."""
    import io

    from gpuscope.trace import perfetto
    from gpuscope.trace import timeline as T

    tr = read_trace(next((ddp_cycles / "cycle0").glob("rank1*.gz")))
    tl = T.Timeline(wall_base_ns=int(tr.cols["ts_ns"].min()))
    buf = io.StringIO()
    n = perfetto.write(tl, buf, extra=perfetto_events([tr], tl.wall_base_ns, tl.mono_base_ns))
    doc = json.loads(buf.getvalue())
    assert n == len(doc["traceEvents"]) > 0
    assert {e["pid"] for e in doc["traceEvents"]} == {tr.pid}
    assert min(float(e["ts"]) for e in doc["traceEvents"] if e["ph"] == "X") == 0.0
