"""Spawn workers take a while to start (their initializer: the re-import of __main__ is quick), then
run a few tiny tasks.

The first task of each worker waits at a barrier for the other's, so both workers run tasks
(otherwise the first worker ready may do all eight before its sibling has started).
"""
import multiprocessing as mp
import threading
import time

_barrier = None
_first = threading.local()


def init(barrier):
    global _barrier
    _barrier = barrier
    time.sleep(0.8)       # a slow set-up, paid by every worker


def inc(x):
    if _barrier is not None and not getattr(_first, "done", False):
        _first.done = True
        _barrier.wait(timeout=60)
    return x + 1


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    with ctx.Pool(2, initializer=init, initargs=(barrier,)) as pool:
        print(sum(pool.map(inc, range(8), chunksize=1)), flush=True)
