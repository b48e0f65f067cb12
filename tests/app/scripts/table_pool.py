"""The process table's workload: a Pool(3) whose tasks spin for different times, then wait for a
file; the run ends once ``argv[1]`` exists: close + join (the workers exit normally), or, when a
worker was killed and its task lost, terminate (SIGTERM to the workers: a pool cannot join then)."""
import multiprocessing as mp
import os
import sys
import time


def task(args):
    i, stop = args
    end = time.monotonic() + 0.1 * (i + 1)     # different CPU times per task
    x = 0
    while time.monotonic() < end:
        x += 1
    while not os.path.exists(stop):
        time.sleep(0.05)
    return os.getpid()


if __name__ == "__main__":
    stop = sys.argv[1]
    pool = mp.Pool(3)
    result = pool.map_async(task, [(i, stop) for i in range(3)], chunksize=1)
    while not os.path.exists(stop):
        time.sleep(0.05)
    result.wait(5.0)          # a task lost with a killed worker never completes: do not wait for it
    if result.ready():
        pool.close()
    else:
        pool.terminate()
    pool.join()
    print("done", flush=True)
