"""A parent and a Pool(2) whose workers each run one @nvtx.annotate task at the same time."""
import multiprocessing as mp
import sys

import nvtx

_barrier = None


def init(barrier):
    global _barrier
    _barrier = barrier


@nvtx.annotate(color="red")
def expensive_op(x):
    if _barrier is not None:
        _barrier.wait(timeout=60)  # both workers are inside a task at once: each gets one
    return sum(i * i for i in range(20000)) + x


if __name__ == "__main__":
    expensive_op(0)
    barrier = mp.Barrier(2)
    with mp.Pool(2, initializer=init, initargs=(barrier,)) as pool:
        results = pool.map(expensive_op, [1, 2], chunksize=1)
    print("results", len(results))
    print("start method", mp.get_start_method(), file=sys.stderr)
