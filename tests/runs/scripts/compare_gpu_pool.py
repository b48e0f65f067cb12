"""A Pool(2) whose two tasks each take 0.6 s (long enough for the telemetry sampler to see the
workers): the GPU figures of a comparison, with the fake NVML of tests/fakes."""
import multiprocessing as mp
import time


def work(x):
    time.sleep(0.6)
    return x


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print(pool.map(work, [1, 2], chunksize=1))
