"""A spawn pool whose script imports numpy at module level: every worker imports it again when it
re-imports __main__, before its first task."""
import multiprocessing as mp
import sys
import time

import numpy as np


def work(i):
    # long enough that the second worker still finds tasks once it has started: each worker's
    # time to its first task is then its own start, not a wait for the other's
    time.sleep(0.1)
    return float(np.sqrt(i))


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        print(sum(pool.map(work, range(16), chunksize=1)), flush=True)
