"""A Pool(2) program with NVTX ranges, for real nsys recordings in tests.

    python pool_script.py METHOD [--features] [--reregister] [--ranges N]

METHOD: spawn | fork | forkserver. --features adds, in the parent: a range in a domain, marks,
a start/end range ended on another thread, and a push range left open at exit.
--reregister applies NSYS.md's verified recipe so fork children's ranges survive
--trace-fork-before-exec=true: the annotated function re-creates its nvtx.annotate object (so its
message is registered again) the first time it runs in a new process. --flush (with --reregister)
makes fork children leave through C exit() so nsys flushes all their events, not just the first.
--ranges N: every process (parent and both workers) does N push/pop pairs (benchmarks).
Prints one line: the monotonic and wall clock just before a mark named "clock-probe".
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time

import nvtx

_ANN: dict[int, nvtx.annotate] = {}
REREGISTER = "--reregister" in sys.argv


def _exit_through_libc() -> None:
    """Leave a fork child through C exit() so the nsys injection library flushes its buffers
    (multiprocessing ends fork children with os._exit, which skips that)."""
    import ctypes

    sys.stdout.flush()
    ctypes.CDLL(None).exit(0)


def _after_fork_in_child() -> None:
    # A fork child must not reuse the parent's domain handle and registered strings (NSYS.md).
    nvtx.get_domain.cache_clear()
    if "--flush" in sys.argv:
        from multiprocessing import util

        util.Finalize(None, _exit_through_libc, exitpriority=-100)


if REREGISTER:
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _annotation() -> nvtx.annotate:
    pid = os.getpid()
    if pid not in _ANN:
        _ANN.clear()
        _ANN[pid] = nvtx.annotate("expensive_op", color="green")
    return _ANN[pid]


@nvtx.annotate("expensive_op", color="green")
def expensive_op(x: int) -> int:
    total = 0
    for i in range(20000):
        total += i
    time.sleep(0.02)   # long enough that both pool workers get tasks
    return x * x + total * 0


def work(x: int) -> int:
    if REREGISTER:
        with _annotation():
            return expensive_op.__wrapped__(x)
    return expensive_op(x)


def _pid_after(delay: float) -> int:
    time.sleep(delay)
    return os.getpid()


def _wait_for_both(barrier) -> None:
    """Pool initializer: no task starts before both workers exist, so both get tasks."""
    barrier.wait(timeout=60)


def loop(n: int) -> int:
    for _ in range(n):
        nvtx.push_range("loop_range")
        nvtx.pop_range()
    return n


def features() -> None:
    with nvtx.annotate("outer", domain="mydom"):
        with nvtx.annotate("inner", domain="mydom"):
            time.sleep(0.001)
    nvtx.mark("mark_one")
    nvtx.mark("mark_two", color="red")
    rid = nvtx.start_range("cross_thread")
    t = threading.Thread(target=nvtx.end_range, args=(rid,))
    time.sleep(0.001)
    t.start()
    t.join()
    rid2 = nvtx.start_range("same_thread_se")
    time.sleep(0.001)
    nvtx.end_range(rid2)
    mono, wall = time.monotonic_ns(), time.time_ns()
    nvtx.mark("clock-probe")
    print(f"clock-probe {mono} {wall}", flush=True)


def main() -> None:
    method = sys.argv[1]
    n = int(sys.argv[sys.argv.index("--ranges") + 1]) if "--ranges" in sys.argv else 0
    work(1)
    ctx = mp.get_context(method)
    with ctx.Pool(2, initializer=_wait_for_both, initargs=(ctx.Barrier(2),)) as pool:
        if n:
            res = pool.map_async(loop, [n, n], chunksize=1)
            loop(n)
            res.get()
        else:
            print(sum(pool.map(work, range(6), chunksize=1)), flush=True)
            print("workers", len(set(pool.map(_pid_after, [0.05] * 4, chunksize=1))), flush=True)
        pool.close()
        pool.join()
    if "--features" in sys.argv:
        features()
        nvtx.push_range("left_open")


if __name__ == "__main__":
    main()
