"""The program's output and environment under gpuscope: unchanged bytes, whole lines, nothing added.

Issue 15.2: no PYTHONUNBUFFERED (or anything else) in the program's environment beyond GPUSCOPE_*
and the boot folder on PYTHONPATH; live output through a pty with output processing off, so the
bytes are the program's own; issue 15.5: the saved output is capped (head and tail kept).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from gpuscope import rundir as layout
from gpuscope.runs.supervisor import Run
from gpuscope.spec import RunSpec
from tests.runs.helpers import env_without, gpuscope, script, summary

DUMP_ENV = """
import json, os, sys
with open(sys.argv[1], "w") as fh:
    json.dump(dict(os.environ), fh)
"""

# Every byte value, bare \\n, \\r\\n, a lone \\r, and a line without an end.
WRITE_BYTES = """
import os, sys
data = bytes(range(256)) * 4 + b"one\\ntwo\\r\\nthree\\rfour\\n" + b"x" * 100000 + b"\\nend"
sys.stdout.buffer.write(data)
sys.stdout.flush()
sys.stderr.write(f"isatty {sys.stdout.isatty()}\\n")
"""


def _expected_bytes() -> bytes:
    return bytes(range(256)) * 4 + b"one\ntwo\r\nthree\rfour\n" + b"x" * 100000 + b"\nend"


def test_program_environment_is_the_parents(run_env, tmp_path):
    """Compared with the real parent's environment (this sandbox exports PYTHONUNBUFFERED=1 itself:
    the parent here runs without it, and with a variable of its own that must arrive unchanged)."""
    parent = dict(env_without(run_env, "PYTHONUNBUFFERED"), GS_TEST_MARK="kept as is")
    prog = tmp_path / "dump_env.py"
    prog.write_text(DUMP_ENV)
    out = tmp_path / "env.json"
    proc = gpuscope("run", "--json", "--quiet", str(prog), str(out), env=parent)
    assert summary(proc)["status"] == "exited", proc.stderr.decode()[-2000:]
    seen = json.loads(out.read_text())
    own = {k for k in seen if k.startswith("GPUSCOPE_")}
    assert own, "the program sees gpuscope's own variables"
    theirs = {k: v for k, v in seen.items() if k not in own and k != "PYTHONPATH"}
    expected = {k: v for k, v in parent.items() if not k.startswith("GPUSCOPE_") and k != "PYTHONPATH"}
    assert theirs == expected, sorted(set(theirs.items()) ^ set(expected.items()))
    boot = seen["PYTHONPATH"].split(os.pathsep)
    assert boot[1:] == ([parent["PYTHONPATH"]] if parent.get("PYTHONPATH") else [])
    assert "boot" in boot[0]


def _run(code: str, tmp_path, **kwargs):
    path = tmp_path / "prog.py"
    path.write_text(code)
    chunks: list[tuple[str, bytes]] = []
    run = Run(RunSpec(script=str(path)), output=[lambda n, d: chunks.append((n, d))], **kwargs).start()
    result = run.wait()
    return result, chunks


def test_live_stdout_is_a_terminal_with_unchanged_bytes(tmp_path):
    result, chunks = _run(WRITE_BYTES, tmp_path, live_output=True)
    assert result.status == "exited"
    relayed = b"".join(d for n, d in chunks if n == "stdout")
    assert relayed == _expected_bytes()
    assert (result.run_dir / layout.STDOUT).read_bytes() == _expected_bytes()
    assert (result.run_dir / layout.STDERR).read_bytes() == b"isatty True\n"  # stderr: separate pipe


def test_unwatched_stdout_is_a_pipe(tmp_path):
    result, chunks = _run(WRITE_BYTES, tmp_path, live_output=False)
    assert (result.run_dir / layout.STDOUT).read_bytes() == _expected_bytes()
    assert (result.run_dir / layout.STDERR).read_bytes() == b"isatty False\n"


def test_two_torchrun_ranks_print_whole_lines(tmp_path):
    """Two ranks writing lines at once: each rank's stdout is a terminal (the pty), and a line
    written in one write() is never cut by the other rank's (torchrun's own `python -u` makes a
    plain print() two writes, with or without gpuscope)."""
    chunks: list[bytes] = []
    spec = RunSpec(script=script("rank_lines.py"), launcher="torchrun", nproc=2)
    result = Run(spec, output=[lambda n, d: chunks.append(d) if n == "stdout" else None]).start().wait()
    assert result.status == "exited", result.error
    saved = (result.run_dir / layout.STDOUT).read_bytes()
    assert saved == b"".join(chunks)
    lines = saved.decode().splitlines()
    assert sorted(line for line in lines if line.startswith("isatty")) == ["isatty 0 True", "isatty 1 True"]
    steps = [line for line in lines if not line.startswith("isatty")]
    bad = [line for line in steps if not re.fullmatch(r"rank [01] step \d+ loss=-?\d+\.\d{3}", line)]
    assert not bad, bad[:5]
    assert len(steps) == 800


def test_saved_output_is_capped_head_and_tail(tmp_path):
    code = "import sys\nfor i in range(30000):\n    sys.stdout.write(f'{i:07d} ' + 'y' * 92 + '\\n')\n"
    result, chunks = _run(code, tmp_path, live_output=False, output_cap_bytes=1_000_000)
    relayed = b"".join(d for n, d in chunks if n == "stdout")
    assert len(relayed) == 30000 * 101  # the live relay is never cut
    saved = (result.run_dir / layout.STDOUT).read_bytes()
    assert saved.startswith(relayed[:500_000]) and saved.endswith(relayed[-500_000:])
    note = saved[500_000:-500_000]
    dropped = len(relayed) - 1_000_000
    assert note.startswith(f"\n[gpuscope: {dropped} bytes of output dropped here".encode()), note[:200]


def test_cap_from_the_command_line_and_the_environment(run_env, tmp_path):
    prog = tmp_path / "big.py"
    prog.write_text("import sys\nsys.stdout.write('z' * 3_000_000 + '\\n')\n")
    for extra, env, size in ((["--output-cap-mb", "1"], run_env, 1 << 20),
                             ([], dict(run_env, GPUSCOPE_OUTPUT_CAP_MB="2"), 2 << 20),
                             (["--output-cap-mb", "0"], dict(run_env, GPUSCOPE_OUTPUT_CAP_MB="1"), None)):
        proc = gpuscope("run", "--json", "--quiet", *extra, str(prog), env=env)
        assert proc.stdout.startswith(b"z" * 3_000_000)
        saved = (Path(summary(proc)["run_dir"]) / layout.STDOUT).read_bytes()
        if size is None:
            assert saved == b"z" * 3_000_000 + b"\n"
        else:
            assert saved.count(b"z") == size - 1 and b"bytes of output dropped here" in saved, (extra, len(saved))


if __name__ == "__main__":
    sys.exit("run with pytest")


LATE_CHILD = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5); print('late line', flush=True)"])
print("main done", flush=True)
"""

ESCAPED_CHILD = """
import os, subprocess, sys
# no environment: the child carries no run marker and leaves the run's session (a daemon)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={}, start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
"""


def test_output_of_a_child_still_exiting_is_read_before_the_run_ends(tmp_path):
    """The main process exits first; a child of the run prints 1.5 s later: the run's end waits for it
    (multiprocessing's resource tracker and reaped pool workers hold the pipes the same way)."""
    result, chunks = _run(LATE_CHILD, tmp_path)
    assert result.status == "exited"
    relayed = b"".join(d for n, d in chunks if n == "stdout")
    assert relayed == b"main done\nlate line\n"
    assert not [n for n in result.notes if "outlived" in n], result.notes


def test_an_escaped_process_holding_the_output_does_not_hold_the_run(tmp_path):
    """A daemon that left the run (new session, no marker) keeps stdout open for 60 s: the run ends
    within seconds, with a note saying so."""
    pid_file = tmp_path / "daemon.pid"
    path = tmp_path / "prog.py"
    path.write_text(ESCAPED_CHILD)
    run = Run(RunSpec(script=str(path), args=(str(pid_file),))).start()
    try:
        t0 = time.monotonic()
        result = run.wait()
        took = time.monotonic() - t0
        assert result.status == "exited"
        assert [n for n in result.notes if "outlived the run still holds its stdout" in n], result.notes
        assert took < 30, took
    finally:
        os.kill(int(pid_file.read_text()), 9)


def test_the_json_line_is_a_line_of_its_own_after_output_without_a_final_newline(run_env, tmp_path):
    """`--json` prints the summary on the last line of stdout: after the program's bytes, unchanged,
    and after a newline of its own only when the program's output stopped mid-line (a process
    killed between a print's text and its newline, or a last write without one)."""
    for text, ends in (("partial", False), ("whole\n", True)):
        prog = tmp_path / f"out_{ends}.py"
        prog.write_text(f"import sys\nsys.stdout.write({text!r})\n")
        out = gpuscope("run", "--quiet", "--json", str(prog), env=run_env, timeout=300)
        assert out.returncode == 0, out.stderr.decode()
        json_line = out.stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        assert out.stdout == text.encode() + (b"" if ends else b"\n") + json_line + b"\n", out.stdout
        assert json.loads(json_line)["status"] == "exited"
