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


def parted(method: str, walls: list[float], parts: list[dict[str, float]], **more: list[float]) -> list[RunFigures]:
    runs = series(method, walls, **more)
    for f, p in zip(runs, parts):
        f.parts = dict(p)
    return runs


def _parts(reimport: float, interpreter: float, tasks: float, rest: float) -> dict[str, float]:
    return {"launch": 30.0, "main_before_workers": 400.0, "process_start": 2.0, "interpreter": interpreter,
            "hook": 0.0, "main_reimport": reimport, "to_first_task": 1.0, "tasks": tasks, "after_tasks": rest,
            "finish": 20.0}


def test_beyond_noise_verdict_accounts_for_the_difference_by_its_parts():
    """The difference is cut into the wall time's parts, largest first, each with its share and
    its own noise status; the re-import is named with its time; what is left is said."""
    fork = parted("fork", [0.50, 0.51, 0.52], [_parts(2, 2, 50, 4), _parts(2, 2, 51, 4), _parts(2, 3, 52, 4)],
                  child_startup_ms=[3, 3, 3], task_ms_median=[10, 10.5, 11])
    spawn = parted("spawn", [0.86, 0.87, 0.88], [_parts(240, 60, 50, 8), _parts(245, 62, 52, 8),
                                                  _parts(250, 64, 53, 8)],
                   child_startup_ms=[60, 62, 64], task_ms_median=[10.2, 10.6, 11.5])
    comp = build({"fork": fork, "spawn": spawn})
    assert [m.name for m in comp.breakdown][:3] == ["launch", "main_before_workers", "process_start"]
    assert comp.breakdown[5].values["spawn"] == Spread(245, 240, 250, 3)
    assert comp.verdict == (
        "Spawn is 1.71× slower here: +360 ms of wall time (0.51 s → 0.87 s); largest first: re-importing __main__ "
        "in the worker +243 ms (68 %: 245 ms under spawn, 2 ms under fork); the worker's interpreter start-up "
        "+60 ms (17 %: 62 ms under spawn, 2 ms under fork); the other parts +5 ms (1 %); not accounted for +52 ms "
        "(14 %; the parts' medians come from different repeats).")
    # the parts that are within noise say so; the tasks say what one task does
    comp = build({"fork": fork, "spawn": parted("spawn", [0.86, 0.87, 0.88],
                                                [_parts(240, 60, 150, 8), _parts(245, 62, 149, 8),
                                                 _parts(250, 1, 160, 8)], task_ms_median=[10.2, 10.6, 11.5])})
    assert "the tasks +99 ms (28 %: 150 ms under spawn, 51 ms under fork; per task no difference beyond " \
           "noise, 1.01×)" in comp.verdict, comp.verdict
    assert "the worker's interpreter start-up +58 ms (16 %: 60 ms under spawn, 2 ms under fork, within noise)" \
        in comp.verdict, comp.verdict
    assert comp.verdict.endswith("not accounted for −44 ms (−12 %; the parts' medians come from different repeats).")


def test_the_reimport_names_its_slowest_modules():
    fork = parted("fork", [0.50, 0.51], [_parts(2, 2, 50, 4), _parts(2, 2, 51, 4)])
    spawn = parted("spawn", [0.86, 0.87], [_parts(300, 60, 50, 8), _parts(310, 62, 52, 8)])
    for f in spawn:
        f.reimport_modules = [("slow_settings", 301.0), ("numpy", 95.5), ("json", 2.0), ("re", 1.0)]
    comp = build({"fork": fork, "spawn": spawn})
    assert ("re-importing __main__ in the worker +303 ms (84 %: 305 ms under spawn, 2 ms under fork; its slowest "
            "imports: slow_settings 301 ms, numpy 95.5 ms, json 2 ms)") in comp.verdict, comp.verdict
    assert comp.to_json()["reimport_modules"]["spawn"][0] == ["slow_settings", 301.0]


def test_forkserver_start_is_said_with_the_process_start():
    fork = parted("fork", [0.50, 0.51], [_parts(2, 2, 50, 4), _parts(2, 2, 51, 4)])
    server = parted("forkserver", [0.80, 0.82], [_parts(90, 0, 50, 4), _parts(95, 0, 51, 4)])
    for f in server:
        f.parts["process_start"] = 200.0
    comp = build({"fork": fork, "forkserver": server})
    assert ("starting the worker processes (start(): creating them, pickling their arguments) and the fork "
            "server's own start (the first start() waits for it) +198 ms") in comp.verdict, comp.verdict


def test_child_startup_alone_never_explains_a_difference():
    """Without parts (runs without event logs) the verdict names the metrics beyond noise, and the
    child start-up never alone: the re-import stands beside it."""
    comp = build({
        "fork": series("fork", [1.05, 1.10, 1.00], child_startup_ms=[30, 31, 33], main_reimport_ms=[1, 2, 2]),
        "spawn": series("spawn", [1.35, 1.30, 1.40], child_startup_ms=[200, 203, 210],
                        main_reimport_ms=[240, 250, 260]),
    })
    assert comp.verdict.startswith("Spawn is 1.29× slower here: ")
    assert "child start-up 203 ms under spawn vs 31 ms under fork" in comp.verdict
    assert "re-importing __main__ 250 ms under spawn vs 2 ms under fork" in comp.verdict
    assert "which is" not in comp.verdict     # no share of the run claimed for the start-up alone


def test_fork_slower_names_its_bootstrap_not_a_reimport():
    slow_fork = parted("fork", [0.90, 0.91], [_parts(300, 2, 50, 4), _parts(300, 2, 51, 4)])
    spawn = parted("spawn", [0.50, 0.52], [_parts(3, 2, 50, 4), _parts(3, 2, 51, 4)])
    comp = build({"fork": slow_fork, "spawn": spawn})
    assert "the worker's bootstrap (fork re-imports nothing) +297 ms" in comp.verdict, comp.verdict


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
