"""A spawn pool whose script imports numpy at module level: every worker imports it again when it
re-imports __main__, before its first task."""
import multiprocessing as mp
import sys

import numpy as np


def ready(barrier):
    barrier.wait()        # both workers start (and have re-imported __main__) before any task


def work(i):
    return float(np.sqrt(i))


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    with ctx.Pool(2, initializer=ready, initargs=(ctx.Barrier(2),)) as pool:
        print(sum(pool.map(work, range(8), chunksize=1)), flush=True)
