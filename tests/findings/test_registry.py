"""The rules' registry: every rule declares its inputs and phase, the engine runs the after-run
checks through it (a failing check costs only itself), and a stop changes what a rule says."""

from __future__ import annotations

import pytest

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.fix import SetNsysForkTracing
from gpuscope.findings import registry
from gpuscope.findings.registry import STOPPED_NOTE, Input, OnStop, Phase, RunInputs, declare

# every code gpuscope's findings carry (the live ones included), each of which a rule must declare
CODES = {"died-by-signal", "fork-with-threads", "no-progress", "missing-main-guard", "leaked-shm",
         "leaked-semaphore", "cuda-after-fork", "tasks-too-small", "load-imbalance", "startup-dominated",
         "spawn-main-reimport", "large-pickles", "sampler-epoch-not-set", "straggler-rank",
         "rank-not-in-collective", "ray-object-store-spilled", "ray-object-store-growing", "cow-lost",
         "input-bound", "cuda-contexts", "idle-gpu-memory", "left-running", "nvtx-incompatible",
         "nsys-missed-ranges"}


@pytest.fixture
def scratch():
    """Rules a test declares, taken out of the table again afterwards."""
    made: list[str] = []

    def add(rule_id: str, **kw):
        made.append(rule_id)
        kw.setdefault("inputs", Input.EVENTS)
        kw.setdefault("phase", Phase.AFTER)
        kw.setdefault("title", rule_id)
        return declare(rule_id, module="tests.findings.test_registry", **kw)

    registry.load()
    yield add
    for rule_id in made:
        registry._RULES.pop(rule_id, None)


def _f(code: str, pids: tuple[int, ...] = (1,)) -> Finding:
    return Finding(code, f"{code} found", "fix it", Severity.WARNING, pids, evidence({"n": 1}, [], pids))


def test_every_rule_module_loads_and_every_code_has_a_rule():
    assert registry._broken == {}
    emitted = {code for r in registry.rules() for code in r.emits}
    assert CODES <= emitted, sorted(CODES - emitted)
    for r in registry.rules():
        assert r.inputs and r.phases and r.title and r.module, r
        assert r.check is None or Phase.AFTER in r.phases, r
        assert r.to_dict()["codes"] == list(r.emits)
    assert registry.get("load-imbalance").on_stop is OnStop.SAY
    assert registry.get("spawn-main-reimport").inputs == frozenset({Input.EVENTS})
    assert registry.get("no-progress").phases == frozenset({Phase.LIVE})


def test_a_failing_check_costs_only_itself(scratch, tmp_path):
    def boom(run: RunInputs) -> list[Finding]:
        raise RuntimeError("bad data")

    scratch("zz-boom", check=boom)
    scratch("zz-ok", check=lambda run: [_f("zz-ok")])
    found = registry.run_after(RunInputs(str(tmp_path)))
    codes = [f.code for f in found]
    assert "zz-ok" in codes
    (failed,) = [f for f in found if f.code == "rule-failed"]
    assert "zz-boom" in failed.title and "RuntimeError: bad data" in failed.title


def test_applies_is_asked_first(scratch, tmp_path):
    asked = []
    scratch("zz-never", check=lambda run: asked.append("check") or [_f("zz-never")],
            applies=lambda run: asked.append("applies") and False)
    assert "zz-never" not in [f.code for f in registry.run_after(RunInputs(str(tmp_path)))]
    assert asked == ["applies"]


def test_a_stop_makes_rules_say_so_or_stay_silent(scratch, tmp_path):
    scratch("zz-say", check=lambda run: [_f("zz-say")], on_stop=OnStop.SAY)
    scratch("zz-silent", check=lambda run: [_f("zz-silent")], on_stop=OnStop.SILENT)
    scratch("zz-keep", check=lambda run: [_f("zz-keep")])
    whole = {f.code: f for f in registry.run_after(RunInputs(str(tmp_path)))}
    stopped = {f.code: f for f in registry.run_after(RunInputs(str(tmp_path), stopped=True))}
    assert {"zz-say", "zz-silent", "zz-keep"} <= set(whole)
    assert "zz-silent" not in stopped and stopped["zz-keep"] == whole["zz-keep"]
    assert stopped["zz-say"].title.endswith(f"({STOPPED_NOTE})") and STOPPED_NOTE in stopped["zz-say"].evidence.excerpts


def test_a_finding_supersedes_another_for_the_same_processes(scratch, tmp_path):
    scratch("zz-broad", check=lambda run: [_f("zz-broad", (1, 2)), _f("zz-broad", (3,))])
    scratch("zz-precise", check=lambda run: [_f("zz-precise", (1, 2))], supersedes=("zz-broad",))
    found = [(f.code, f.pids) for f in registry.run_after(RunInputs(str(tmp_path))) if f.code.startswith("zz-")]
    assert sorted(found) == [("zz-broad", (3,)), ("zz-precise", (1, 2))]


def test_ids_are_unique_across_modules(scratch):
    with pytest.raises(ValueError, match="declared twice"):
        declare("load-imbalance", inputs=Input.EVENTS, phase=Phase.AFTER, title="again", module="elsewhere")
    with pytest.raises(ValueError, match="Phase.AFTER"):
        scratch("zz-live-check", phase=Phase.LIVE, check=lambda run: [])


def test_coverage_findings_carry_the_structured_fix_and_match_nsys_by_code():
    from gpuscope.trace.coverage import Coverage, ProcessCoverage, _nvtx_incompatible, coverage_findings

    cov = Coverage([ProcessCoverage(7, "pool worker", "fork", True, 10, 0, "missing", 10, "forked",
                                    "record fork children", SetNsysForkTracing(True))])
    (f,) = coverage_findings(cov)
    assert f.code == "nsys-missed-ranges" and f.action == SetNsysForkTracing(True) and f.pids == (7,)
    # nsys's rejection is known by its diagnostic's code, whatever its words
    assert _nvtx_incompatible([{"code": "nvtx-domain-only", "title": "only domains"}]) == "only domains"
    assert _nvtx_incompatible([_f("nvtx-discarded-handles")]) is None
    assert _nvtx_incompatible([Finding("other", "payload extension is incompatible")]) is None


def _worker(pid: int, ranges: list[tuple[int, int]], taken: list[int], end_ns: int | None):
    from gpuscope.trace.events import Name, ProcessEvents

    pe = ProcessEvents(path=f"/x/{pid}-1.log", header={"pid": pid, "ppid": 1, "role": "pool worker",
                                                       "anchor_mono_ns": 0, "anchor_wall_ns": 0},
                       names={0: Name(0, "task", "", "work", "")}, tasks=[(t, pid, 0, i) for i, t in enumerate(taken)],
                       exit={"exit_code": -15} if end_ns is not None else None, end_ns=end_ns)
    pe.info = {**pe.header, "role": "pool worker"}
    pe._rows = [(a, b, pid, 0, b"P") for a, b in ranges]
    return pe


def test_a_task_cut_by_the_end_counts_up_to_the_exit_record():
    """A worker that took a task (its T line) and ended inside it (its X line: a SIGTERM handler under
    nsys writes one): the task counts as busy up to the exit; without the exit record it cannot."""
    from gpuscope.findings.pool_rules import load_imbalance, workers

    a = _worker(11, [(0, 4_000_000_000), (4_000_000_000, 8_000_000_000)], [0, 4_000_000_000], 9_000_000_000)
    b = _worker(12, [(0, 4_000_000_000)], [0, 4_100_000_000], 9_000_000_000)      # its second task cut
    (group,) = workers([a, b]).values()
    busy = {w.pid: w.busy_s for w in group}
    assert busy == {11: 8.0, 12: 8.9}
    assert load_imbalance(group, stopped=True) is None
    lost = _worker(12, [(0, 4_000_000_000)], [0], None)                      # no T line, no exit record
    (group,) = workers([a, lost]).values()
    assert {w.pid: w.busy_s for w in group} == {11: 8.0, 12: 4.0}


def test_the_cli_lists_the_rules(capsys):
    from tests.findings.cli import call, call_json

    code, out, _ = call(capsys, "findings", "--rules")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["RULE", "PHASE", "INPUTS", "STOP", "FINDS"]
    by_id = {ln.split()[0]: ln.split()[1:4] for ln in lines[1:]}
    assert set(by_id) == {r.id for r in registry.rules()}
    assert by_id["load-imbalance"] == ["after", "events", "say"]
    assert by_id["no-progress"] == ["live", "events,output,stacks,telemetry", "keep"]
    rows = {r["id"]: r for r in call_json(capsys, "findings", "--rules")["rules"]}
    assert rows["spawn-main-reimport"]["inputs"] == ["events"] and rows["spawn-main-reimport"]["phases"] == ["after"]


def test_every_rules_applies_on_a_plain_run_imports_no_numpy(tmp_path):
    """Every rule module is loaded and every applies= asked at the end of every run: a run without
    what a rule reads (here: an empty folder) must not pay for its readers (numpy, nsys, torch)."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from gpuscope.findings import registry\n"
            f"found = registry.run_after(registry.RunInputs({str(tmp_path)!r}))\n"
            "print(json.dumps([[f.code for f in found], sorted(m for m in ('numpy', 'torch', 'sqlite3') "
            "if m in sys.modules)]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    codes, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
    assert codes == [] and heavy == [], (codes, heavy)


def test_the_after_index_is_what_the_rule_modules_declare():
    """The end of a run imports rule modules through AFTER_INDEX: every after-run check of every
    rule module must be in it, with its module and inputs."""
    declared = {r.id: (r.module.rsplit(".", 1)[-1], " ".join(sorted(i.value for i in r.inputs)))
                for r in registry.rules(Phase.AFTER) if r.check is not None and r.module.startswith("gpuscope.")}
    index = {rule_id: (module, " ".join(sorted(inputs.split()))) for rule_id, (module, inputs)
             in registry.AFTER_INDEX.items()}
    assert index == declared


def test_a_plain_run_imports_only_the_rule_modules_it_has_inputs_for(tmp_path):
    """No nsys export, no torch traces: the nsys and torch rule modules (and their readers) stay
    unimported, and so do modules without after-run checks; with a torch folder, the torch rules load."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from gpuscope.findings import registry\n"
            "found = registry.run_after(registry.RunInputs(sys.argv[1]))\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('gpuscope.findings.', "
            "'gpuscope.torchtrace', 'gpuscope.procs.shm')))))\n")

    def loaded() -> list[str]:
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    plain = loaded()
    for name in ("gpuscope.findings.gpu_rules", "gpuscope.findings.torch_ops_rules", "gpuscope.findings.attach_rules",
                 "gpuscope.findings.telemetry_rules", "gpuscope.torchtrace.run", "gpuscope.procs.shm"):
        assert name not in plain, (name, plain)
    assert "gpuscope.findings.pool_rules" in plain and "gpuscope.findings.summary_rules" in plain, plain
    (tmp_path / registry.TORCH_DIR).mkdir()
    assert "gpuscope.findings.torch_ops_rules" in loaded()


def test_the_torch_names_are_the_trace_readers():
    from gpuscope.torchtrace import run as torch_run

    assert (registry.TORCH_DIR, registry.TORCH_LOST_NOTE) == (torch_run.TORCH_DIR, torch_run.LOST_NOTE)


def test_the_live_recorders_early_load_follows_the_index(tmp_path):
    """The watchdog's load while a run of several processes goes on: the after-run modules this run
    has inputs for so far, not the nsys and torch readers' rules."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from gpuscope.findings import engine\n"
            "engine.load_rules(sys.argv[1])\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gpuscope.findings.'))))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "gpuscope.findings.pool_rules" in loaded and "gpuscope.findings.ddp_rules" in loaded, loaded
    assert "gpuscope.findings.gpu_rules" not in loaded and "gpuscope.findings.torch_ops_rules" not in loaded, loaded
