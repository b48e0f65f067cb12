"""`cow-lost` trigger (no argument): the parent holds ~180 MB of small Python objects; two fork pool
workers only read them (len of each), which writes every object's reference count and so copies
the pages. Clean (`bytes`): the same size held in one bytes object, which reading does not write."""
import multiprocessing as mp
import sys
import time

DATA = None


def work(_):
    if isinstance(DATA, bytes):
        total = DATA.count(b"\x02")
    else:
        total = sum(len(x) for x in DATA)
    time.sleep(3)                       # let the sampler see the workers' memory
    return total


if __name__ == "__main__":
    if sys.argv[1:] == ["bytes"]:
        DATA = b"\x01" * (180 << 20)
    else:
        DATA = [str(i) for i in range(3_000_000)]
    with mp.get_context("fork").Pool(2) as pool:
        print("sum", sum(pool.map(work, [0, 1], chunksize=1)))
