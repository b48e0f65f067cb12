"""A parent and a Pool(2): each worker runs NVTX-annotated tasks for about a second and prints."""
import multiprocessing as mp
import sys
import time

import nvtx


@nvtx.annotate("work", color="green")
def work(i):
    end = time.monotonic() + 0.25
    x = 0
    while time.monotonic() < end:
        x += 1
    print(f"task {i} done", flush=True)
    return i


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    with nvtx.annotate("setup"):
        time.sleep(0.2)
    with mp.Pool(2) as pool:
        n = max(2, int(seconds / 0.25) * 2)
        print("results", sum(pool.map(work, range(n), chunksize=1)), flush=True)
    print("start method", mp.get_start_method(), file=sys.stderr)
