"""Counts its runs in the file given as argument; the second run fails (exit code 3) after its pool
ran: a failed run among a series' repeats."""
import multiprocessing as mp
import sys
from pathlib import Path


def work(n):
    return sum(i * i for i in range(n))


if __name__ == "__main__":
    counter = Path(sys.argv[1])
    count = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(count + 1))
    with mp.Pool(2) as pool:
        pool.map(work, [10000] * 2, chunksize=1)
    if count == 1:
        sys.exit(3)
