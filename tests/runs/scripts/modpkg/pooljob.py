"""`python -m modpkg.pooljob`: a Pool(2) whose workers each run one @nvtx.annotate task at once."""
import multiprocessing as mp
import sys

import nvtx

from modpkg import helpers

_barrier = None


def init(barrier):
    global _barrier
    _barrier = barrier


@nvtx.annotate(color="red")
def expensive_op(x):
    if _barrier is not None:
        _barrier.wait(timeout=60)  # both workers are inside a task at once: each gets one
    return helpers.spin(20000) + x


def main():
    expensive_op(0)
    barrier = mp.Barrier(2)
    with mp.Pool(2, initializer=init, initargs=(barrier,)) as pool:
        results = pool.map(expensive_op, [1, 2], chunksize=1)
    print("results", len(results), "module", __spec__.name, "args", sys.argv[1:])
    print("start method", mp.get_start_method(), file=sys.stderr)


if __name__ == "__main__":
    main()
