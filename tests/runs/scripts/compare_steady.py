"""A steady workload for comparisons: a Pool(2) runs 4 tasks of the same fixed CPU work."""
import multiprocessing as mp


def work(n):
    return sum(i * i for i in range(n))


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print("sum", sum(pool.map(work, [40000] * 4, chunksize=1)))
