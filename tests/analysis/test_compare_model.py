"""The comparison model on given figures: the beyond-noise rule, ratios, the verdict's wording,
left-out runs, ranges, and the JSON/Markdown forms (real runs: tests/runs/test_compare*.py)."""

from __future__ import annotations

import itertools
import json
import random
import statistics

from gpuscope.analysis.comparison import build
from gpuscope.analysis.run_figures import RunFigures
from gpuscope.analysis.stats import Spread, beyond_noise, separated, spread

_ids = itertools.count(1)


def fig(method: str, status: str = "exited", ranges: dict | None = None, **values: float) -> RunFigures:
    run_id = f"run-{next(_ids)}"
    return RunFigures(run_id=run_id, run_dir=f"/tmp/{run_id}", status=status, start_method=method,
                      spec={"script": "/x/train.py", "args": []}, has_events=True,
                      why_left_out=None if status == "exited" else status, values=dict(values),
                      roles={"main": 1, "pool worker": 2}, ranges=dict(ranges or {}))


def series(method: str, walls: list[float], **more: list[float]) -> list[RunFigures]:
    return [fig(method, wall_s=w, **{k: v[i] for k, v in more.items()}) for i, w in enumerate(walls)]


def test_rule():
    assert spread([3, None, 1, 2]) == Spread(2.0, 1.0, 3.0, 3)
    assert spread([None]) is None
    a, b, c = Spread(1, 0.9, 1.1, 3), Spread(1.5, 1.2, 1.6, 3), Spread(1.05, 1.0, 1.3, 3)
    assert separated(a, b) and not separated(a, c) and not separated(b, c)
    assert not separated(Spread(1, 1, 1, 1), Spread(5, 5, 5, 1))     # one run each: never beyond noise
    assert not separated(a, None)
    assert beyond_noise([c, a, b]) and not beyond_noise([a, c])


def test_overlapping_repeats_are_no_difference():
    comp = build({"fork": series("fork", [1.00, 1.20, 1.10]), "spawn": series("spawn", [1.15, 1.25, 1.05])})
    wall = comp.metric("wall_s")
    assert not wall.beyond_noise and round(wall.ratio, 4) == round(1.15 / 1.10, 4)
    assert comp.verdict.startswith("No difference beyond noise in wall time (fork 1.1 s (1 s–1.2 s), spawn 1.15 s")
    assert "slower" not in comp.verdict


def test_beyond_noise_verdict_explains_with_startup_and_tasks():
    comp = build({
        "fork": series("fork", [1.05, 1.10, 1.00], child_startup_ms=[30, 31, 33], task_ms_median=[10, 10.5, 11]),
        "spawn": series("spawn", [1.35, 1.30, 1.40], child_startup_ms=[200, 203, 210],
                        task_ms_median=[10.2, 10.6, 11.5]),
    })
    assert comp.metric("wall_s").beyond_noise and comp.metric("child_startup_ms").beyond_noise
    assert not comp.metric("task_ms_median").beyond_noise
    assert comp.verdict == ("Spawn is 1.29× slower here: each worker needs 203 ms to start (fork: 31 ms), which is "
                            "15 % of this 1.35 s run; the tasks themselves show no difference beyond noise (1.01×).")


def test_one_run_each_cannot_separate():
    comp = build({"fork": series("fork", [1.0]), "spawn": series("spawn", [3.0])})
    assert comp.verdict.startswith("One run each cannot separate a difference from noise")
    assert not any(m.beyond_noise for m in comp.metrics)
    assert any("one run only" in w for w in comp.warnings)


def test_left_out_runs_are_said_and_not_in_the_medians():
    bad = fig("spawn", status="failed (exit code 1)", wall_s=0.1)
    bad.why_left_out = "failed (exit code 1)"
    comp = build({"fork": series("fork", [1.0, 1.1]), "spawn": [*series("spawn", [2.0, 2.1]), bad]})
    assert comp.left_out == {bad.run_id: "failed (exit code 1)"}
    assert comp.metric("wall_s").values["spawn"] == Spread(2.05, 2.0, 2.1, 2)
    assert bad.run_id in comp.runs["spawn"] and bad.run_id not in comp.usable_runs("spawn")
    assert any(bad.run_id in w and "left out of the medians" in w for w in comp.warnings)
    assert comp.verdict.startswith("Spawn is 1.95× slower here")


def test_three_methods():
    comp = build({"fork": series("fork", [1.0, 1.1]), "spawn": series("spawn", [2.0, 2.2]),
                  "forkserver": series("forkserver", [1.05, 1.2])})
    wall = comp.metric("wall_s")
    assert wall.ratios == {"spawn": 2.1 / 1.05, "forkserver": 1.125 / 1.05}
    assert "Spawn is 2.00× slower than fork" in comp.verdict
    assert "No difference beyond noise in wall time between fork and forkserver" in comp.verdict


def test_ranges_medians_and_noise():
    f = [fig("fork", wall_s=1, ranges={"step": (10, 100), "load": (1, 5)}),
         fig("fork", wall_s=1, ranges={"step": (10, 120), "load": (1, 7)})]
    s = [fig("spawn", wall_s=1, ranges={"step": (10, 200)}), fig("spawn", wall_s=1, ranges={"step": (10, 260)})]
    comp = build({"fork": f, "spawn": s})
    rows = {r.name: r for r in comp.ranges}
    assert [r.name for r in comp.ranges] == ["step", "load"]          # most time first
    step = rows["step"]
    assert step.values["fork"]["count"] == 10 and step.values["fork"]["total_ns"] == 110
    assert step.values["spawn"]["total_ns"] == 230 and step.beyond_noise and step.ratio == 230 / 110
    assert rows["load"].values["spawn"]["count"] == 0 and rows["load"].beyond_noise   # absent = 0 in each run


def test_json_and_markdown_forms():
    comp = build({"fork": series("fork", [1.0, 1.1], child_startup_ms=[30, 31]),
                  "spawn": series("spawn", [2.0, 2.1], child_startup_ms=[200, 210])})
    data = json.loads(json.dumps(comp.to_json()))
    assert set(data) >= {"runs", "metrics", "ranges", "verdict", "warnings", "left_out", "startup"}
    wall = next(m for m in data["metrics"] if m["name"] == "wall_s")
    assert wall["values"]["spawn"] == {"median": 2.05, "min": 2.0, "max": 2.1, "n": 2}
    assert wall["beyond_noise"] is True and wall["unit"] == "s"
    md = comp.to_markdown({"wall time": "wall.png"})
    assert "| Wall time | 1.05 s (1 s–1.1 s) | 2.05 s (2 s–2.1 s) | 1.95× | yes |" in md
    assert md.rstrip().endswith("![wall time](wall.png)")


def test_noise_is_never_called_a_result():
    """Whatever the numbers, while the two sides' ranges overlap (or their medians are within 5 %)
    the verdict names no slower side."""
    rng = random.Random(11)
    for _ in range(200):
        base = rng.uniform(0.1, 10)
        a = [base * rng.uniform(0.8, 1.2) for _ in range(rng.randint(2, 5))]
        b = [base * rng.uniform(0.8, 1.2) for _ in range(rng.randint(2, 5))]
        comp = build({"fork": series("fork", a), "spawn": series("spawn", b)})
        overlap = min(a) <= max(b) and min(b) <= max(a)
        ma, mb = statistics.median(a), statistics.median(b)
        small = abs(ma - mb) < 0.05 * max(ma, mb)
        assert ("slower" in comp.verdict) == (not overlap and not small), (a, b, comp.verdict)


def test_nothing_to_compare_when_no_run_ended_normally():
    def failed(method):
        f = fig(method, status="failed", wall_s=1.0)
        f.why_left_out = "failed (exit code 1)"
        return f

    comp = build({"fork": [failed("fork")], "spawn": [failed("spawn")]})
    assert comp.verdict == "Nothing to compare: fork and spawn have no run that ended normally (see the warnings)."
    assert all(s is None for s in comp.metric("wall_s").values.values())
    comp = build({"fork": series("fork", [1.0, 1.1]), "spawn": [failed("spawn")]})
    assert comp.verdict.startswith("Nothing to compare: spawn has no run")


def test_tight_but_equal_spreads_are_no_difference():
    """Two runs each, ranges that do not overlap, medians 0.05 % apart: not a difference (the 5 % floor)."""
    comp = build({"fork": series("fork", [200.2e-3, 200.21e-3]), "spawn": series("spawn", [200.3e-3, 200.31e-3])})
    assert not comp.metric("wall_s").beyond_noise and "No difference beyond noise" in comp.verdict
    comp = build({"fork": series("fork", [0.200, 0.201]), "spawn": series("spawn", [0.230, 0.231])})
    assert comp.metric("wall_s").beyond_noise and "slower" in comp.verdict
