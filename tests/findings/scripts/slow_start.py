"""Spawn workers re-import a module that takes a while to load, then run a few tiny tasks."""
import multiprocessing as mp
import time

time.sleep(0.8)           # a heavy import, paid again by every spawn worker


def inc(x):
    return x + 1


if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:
        print(sum(pool.map(inc, range(8), chunksize=1)), flush=True)
