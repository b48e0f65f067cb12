"""A spawn pool created at import time, without `if __name__ == "__main__":` (issue 12)."""
import multiprocessing as mp


def square(x):
    return x * x


pool = mp.get_context("spawn").Pool(2)
print(pool.map(square, range(4)), flush=True)
pool.close()
pool.join()
