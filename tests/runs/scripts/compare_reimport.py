"""A spawn-heavy pool: `__main__` imports numpy and a slow module at the top, so every spawn or
forkserver worker pays those imports again when it re-imports the script; the tasks are short."""
import multiprocessing as mp

import numpy as np
import slow_settings


def work(n):
    return int(np.arange(min(n, slow_settings.LIMIT)).sum())


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print("sum", sum(pool.map(work, [5000] * 4, chunksize=1)))
