"""Bad input: a corrupt or truncated trace, a trace of another PyTorch version, a rank whose trace
is missing: one clear line each (naming the file), the other ranks' report intact."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.errors import UserError
from gpuscope.torchtrace.ops import key_averages
from gpuscope.torchtrace.reader import read_trace
from gpuscope.torchtrace.report import to_json, torch_ops
from tests.torchtrace.conftest import make_run


def _rank(folder: Path, r: int) -> Path:
    return sorted(folder.glob(f"rank{r}.*.pt.trace.json.gz"))[0]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuscope", "report", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("damage", ["gzip cut", "json cut", "garbage"])
def test_damaged_trace_is_one_line_naming_the_file(ddp_cycles, tmp_path, damage):
    data = _rank(ddp_cycles / "cycle0", 0).read_bytes()
    plain = gzip.decompress(data)
    bad = tmp_path / ("t.json.gz" if damage == "gzip cut" else "t.json")
    bad.write_bytes({"gzip cut": data[: len(data) // 2], "json cut": plain[: len(plain) // 2],
                     "garbage": b"{\"traceEvents\": [{\"ph\": \"X\", \xff\xfe garbage"}[damage])
    with pytest.raises(UserError) as err:
        read_trace(bad)
    line = str(err.value)
    assert str(bad) in line and "cut short or corrupt" in line and "\n" not in line


def test_not_a_kineto_trace(tmp_path):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"schemaVersion": 1, "events": []}))
    with pytest.raises(UserError, match="no traceEvents"):
        read_trace(p)


def test_other_version_without_base_time_and_args(ddp_cycles, tmp_path):
    """An older trace: no baseTimeNanoseconds (absolute microseconds), events without args or cat,
    one event without ts: read, the table still counts the ops, the event without ts is counted."""
    doc = json.loads(gzip.decompress(_rank(ddp_cycles / "cycle0", 0).read_bytes()))
    base = doc.pop("baseTimeNanoseconds")
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = e["ts"] + base / 1000
        if e.get("name") == "aten::addmm":
            e.pop("args", None)
    doc["traceEvents"].append({"ph": "X", "name": "no time", "pid": 1, "tid": 1, "dur": 3})
    p = tmp_path / "old.json"
    p.write_text(json.dumps(doc))
    tr = read_trace(p)
    assert tr.skipped == 1
    rows = {r.name: r for r in key_averages(tr)}
    want = sum(e.get("name") == "aten::addmm" for e in doc["traceEvents"])
    assert rows["aten::addmm"].count == want > 0


def test_bad_and_missing_ranks_keep_the_rest(ddp_cycles, tmp_path):
    run = make_run(tmp_path, ddp_cycles / "cycle1")
    bad = _rank(run / "torch", 1)
    bad.write_bytes(bad.read_bytes()[:5000])
    ops = torch_ops(run)
    assert [x.rank for x in ops.ranks] == [0]
    assert len(ops.problems) == 1 and bad.name in ops.problems[0]
    out = _cli(str(run), "--torch-ops")
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "Torch ops, rank 0" in out.stdout and f"! {bad}" in out.stdout

    # the run record lists a third rank whose trace is missing and a fourth that lost it
    listed = [{"path": f"torch/{p.name}", "pid": int(p.name.split(".")[1]), "rank": int(p.name[4])}
              for p in sorted((run / "torch").iterdir())]
    listed += [{"path": "torch/rank2.999.pt.trace.json.gz", "pid": 999, "rank": 2},
               {"path": "", "pid": 998, "rank": 3, "lost": "killed by SIGKILL before the profiler stopped"}]
    (run / "summary.json").write_text(json.dumps({"torch_traces": listed}))
    doc = to_json(torch_ops(run))
    assert [r["rank"] for r in doc["ranks"]] == [0]
    assert len(doc["problems"]) == 3
    assert any("rank 2" in p and "missing" in p for p in doc["problems"])
    assert any("rank 3" in p and "SIGKILL" in p for p in doc["problems"])


def test_cli_bad_input_lines(ddp_cycles, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = _cli(str(empty), "--torch-ops")
    assert out.returncode != 0 and "no torch traces" in out.stderr and "Traceback" not in out.stderr
    run = make_run(tmp_path, ddp_cycles / "cycle0")
    for p in (run / "torch").iterdir():
        p.write_bytes(b"\x1f\x8b broken")
    out = _cli(str(run), "--torch-ops", "--json")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "corrupt" in out.stderr
    out = _cli(str(make_run(tmp_path, ddp_cycles / "cycle0", "ok")), "--torch-ops", "--rank", "7")
    assert out.returncode != 0 and "--rank 7" in out.stderr and "Traceback" not in out.stderr
