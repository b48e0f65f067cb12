"""--annotate does what the user means: imported modules, inherited methods, the script's own
functions from their first call, and a summary per pattern with suggestions."""

from __future__ import annotations

import subprocess
import sys

from gpuscope.runs.annotate_notes import annotate_notes, annotate_results
from gpuscope.trace.events import read_run_events
from tests.runs.helpers import gpuscope, script, summary

PATTERNS = ["json:dumps", "__main__:work", "__main__:Child.step", "__main__:fails", "__main__:wrk",
            "json:dumsp", "jsn:dumps"]


def _range_counts(run_dir: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pe in read_run_events(run_dir):
        for nid in pe.ranges["nid"]:
            name = pe.names[int(nid)]
            if name.kind == "func":
                counts[name.name] = counts.get(name.name, 0) + 1
    return counts


def test_plain_script_patterns(run_env):
    args = [a for p in PATTERNS for a in ("--annotate", p)]
    proc = gpuscope("run", "--json", *args, script("annotate_plain.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    plain = subprocess.run([sys.executable, script("annotate_plain.py")], capture_output=True, env=run_env)
    # the program's output is unchanged: pickling, names, what the classes hold, traceback depth
    assert proc.stdout.rsplit(b"\n", 2)[0] + b"\n" == plain.stdout, (proc.stdout, plain.stdout)
    run_dir = summary(proc)["run_dir"]
    counts = _range_counts(run_dir)
    assert counts["work"] == 4          # from its first call, a top-level one included
    assert counts["Child.step"] == 2    # inherited from Base: only Child's calls
    assert "Base.step" not in counts and "Other.step" not in counts
    assert counts["fails"] == 1
    assert counts["dumps"] == 4         # json was imported before the script started; gpuscope's own log
    #                                     lines (json.dumps too) never count
    results = {r.pattern: r for r in annotate_results(run_dir, PATTERNS)}
    assert results["__main__:work"].functions == {"work"} and results["__main__:work"].calls == 4
    assert results["__main__:Child.step"].functions == {"Child.step"}
    notes = annotate_notes(run_dir, PATTERNS)
    assert "--annotate __main__:work: 1 function (work), 4 calls recorded in 1 process" in notes
    assert "warning: --annotate __main__:wrk matched nothing; did you mean __main__:work?" in notes
    assert any(n.startswith("warning: --annotate json:dumsp matched nothing; did you mean json:dump")
               and "json:dumps" in n for n in notes), notes
    assert any(n.startswith("warning: --annotate jsn:dumps matched nothing; did you mean json:dumps")
               for n in notes), notes
    # the user sees them: after the table on stderr, and in the JSON's notes
    err = proc.stderr.decode()
    for note in notes:
        assert f"gpuscope: {note}" in err, (note, err[-3000:])
        assert note in summary(proc)["notes"]
