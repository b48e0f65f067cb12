"""Every kind of Python process of a run is reached, identified and recorded."""

from __future__ import annotations

from tests.runs.helpers import gpuscope, script, summary


def _by_role(processes):
    out = {}
    for p in processes:
        out.setdefault(p["role"], []).append(p)
    return out


def test_process_manager_executor_subprocess(run_env):
    proc = gpuscope("run", "--json", "--start-method", "spawn",
                    "--annotate", "helper_mod:work", "--annotate", "__main__:main_step",
                    script("many_kinds.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    result = summary(proc)
    roles = _by_role(result["processes"])
    main = roles["main"][0]
    # push/pop, start/end across threads, a mark, and the --annotate'd functions in the script
    assert {"outer", "cross_thread", "gpuscope:main_step", "gpuscope:work"} <= set(main["range_names"])
    assert main["marks"] == 1
    child = roles["process child"][0]
    assert {"mydom:in_child", "gpuscope:work"} <= set(child["range_names"])
    assert child["exit_code"] == 0 and child["clean_exit"]
    assert roles["manager"][0]["name"].startswith("gs:mgr")
    executor_workers = [p for p in roles["executor worker"] if "gpuscope:square" in p["range_names"]]
    assert executor_workers, roles["executor worker"]
    assert all(p["name"].startswith("gs:exec") for p in roles["executor worker"])
    sub = roles["subprocess"][0]
    assert sub["range_names"] == ["in_subprocess"]
    assert b"sub ok" in proc.stdout and b"squares [0, 1, 4, 9]" in proc.stdout


def test_annotate_class_method_with_glob(run_env, tmp_path):
    (tmp_path / "train.py").write_text(
        "import helper_mod\nif __name__ == '__main__':\n    helper_mod.Trainer().step()\n")
    import shutil
    shutil.copy(script("helper_mod.py"), tmp_path / "helper_mod.py")
    proc = gpuscope("run", "--json", "--annotate", "helper_*:Trainer.*", str(tmp_path / "train.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    main = summary(proc)["processes"][0]
    assert main["range_names"] == ["gpuscope:Trainer.step"]


THREADS_AND_FORK = """
import os, threading, time
import nvtx
done = threading.Event()
t = threading.Thread(target=done.wait, name="loader")   # alive until its name is read
t.start()
time.sleep(0.1)
print(open(f"/proc/self/task/{t.native_id}/comm").read().strip())
done.set()
t.join()
pid = os.fork()
if pid == 0:
    with nvtx.annotate("in_fork"):
        print(open("/proc/self/comm").read().strip(), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_os_names_for_threads_and_plain_fork(run_env, tmp_path):
    path = tmp_path / "threads.py"
    path.write_text(THREADS_AND_FORK)
    proc = gpuscope("run", "--json", str(path), env=run_env)
    assert proc.stdout.splitlines()[:2] == [b"loader", b"gs:fork"]
    roles = _by_role(summary(proc)["processes"])
    (child,) = roles["fork child"]
    assert child["start_method"] == "fork" and child["range_names"] == ["in_fork"]
