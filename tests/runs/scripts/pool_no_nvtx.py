"""A spawn Pool(2) whose program never imports nvtx: its tasks' ranges are gpuscope's own."""
import multiprocessing as mp


def square(x):
    return sum(i * i for i in range(20000)) + x


if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:
        print("results", len(pool.map(square, range(4), chunksize=1)))
