"""A spawn pool whose script imports numpy at module level: every worker imports it again when it
re-imports __main__, before its first task."""
import multiprocessing as mp
import sys

import numpy as np


def work(i):
    return float(np.sqrt(i))


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    with mp.get_context(method).Pool(2) as pool:
        print(sum(pool.map(work, range(8), chunksize=1)), flush=True)
