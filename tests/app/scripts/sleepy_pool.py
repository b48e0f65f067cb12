"""Runs until stopped: a Pool(2) whose workers sleep in a loop, printing a heartbeat."""
import multiprocessing as mp
import time


def nap(i):
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        pool.map_async(nap, range(2), chunksize=1)
        while True:
            print("alive", flush=True)
            time.sleep(0.2)
