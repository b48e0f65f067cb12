"""A Pool(2) with a few short tasks that exits 3 on its Nth execution (a counter in a file):
a failed run among the repeats of a series."""
import multiprocessing as mp
import sys
import time
from pathlib import Path


def work(i):
    time.sleep(0.05)
    return i


if __name__ == "__main__":
    counter, fail_on = Path(sys.argv[1]), int(sys.argv[2])
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    with mp.Pool(2) as pool:
        print("results", sum(pool.map(work, range(4))), flush=True)
    if n == fail_on:
        print(f"execution {n}: failing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
