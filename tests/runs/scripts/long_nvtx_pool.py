"""A pool that works in NVTX-annotated rounds for a long time (the stop tests end it early)."""
import multiprocessing as mp
import time

import nvtx


@nvtx.annotate("work", color="red")
def work(x):
    t = time.monotonic()
    while time.monotonic() - t < 0.05:
        pass
    return x


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        for i in range(3000):
            with nvtx.annotate("round"):
                pool.map(work, [1, 2])
            print("round", i, flush=True)
