"""A pool whose workers ignore SIGTERM and SIGINT and never finish."""
import multiprocessing as mp
import signal
import sys
import time


def ignore():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def forever(_):
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    pool = mp.Pool(2, initializer=ignore)
    pool.map_async(forever, range(4))
    print("pool running", flush=True)
    print("started", file=sys.stderr, flush=True)
    while True:
        time.sleep(0.1)
