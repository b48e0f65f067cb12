"""Thousands of trivial tasks with chunksize=1: the pool moves tasks more than it runs them."""
import multiprocessing as mp


def inc(x):
    return x + 1


if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        print(sum(pool.map(inc, range(3000), chunksize=1)), flush=True)
