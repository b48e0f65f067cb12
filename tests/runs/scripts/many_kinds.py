"""Process, Manager, ProcessPoolExecutor, a python subprocess and nvtx push/pop, marks, start/end."""
import concurrent.futures as cf
import multiprocessing as mp
import subprocess
import sys
import threading

import nvtx

import helper_mod


def child_job(q):
    with nvtx.annotate("in_child", domain="mydom"):
        q.put(helper_mod.work(3))


def square(x):
    return x * x


def main_step():
    return helper_mod.work(1)


if __name__ == "__main__":
    nvtx.push_range("outer", color="green")
    nvtx.mark("checkpoint")
    rid = nvtx.start_range("cross_thread")
    t = threading.Thread(target=nvtx.end_range, args=(rid,))
    t.start(); t.join()
    q = mp.Queue()
    p = mp.Process(target=child_job, args=(q,))
    p.start(); print("child says", q.get()); p.join()
    with mp.Manager() as manager:
        d = manager.dict(); d["a"] = 1
    with cf.ProcessPoolExecutor(2) as ex:
        print("squares", list(ex.map(square, range(4))))
    main_step()
    out = subprocess.run([sys.executable, "-c", "import nvtx\nwith nvtx.annotate('in_subprocess'): pass\nprint('sub ok')"],
                         capture_output=True, text=True)
    print(out.stdout.strip())
    nvtx.pop_range()
