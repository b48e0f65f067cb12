"""One long task among short ones, handed out in two big chunks: one worker does nearly everything."""
import multiprocessing as mp
import time


def work(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


if __name__ == "__main__":
    tasks = [0.9] + [0.02] * 7
    with mp.get_context("fork").Pool(2) as pool:
        print(sum(pool.map(work, tasks, chunksize=4)), flush=True)
