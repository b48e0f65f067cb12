"""A fork pool deadlocked on a lock that a parent thread holds at the fork (issue 12's acceptance)."""
import multiprocessing as mp
import threading
import time

LOCK = threading.Lock()


def holder():
    with LOCK:            # held for good: every fork child inherits it locked
        while True:
            time.sleep(1)


def child(i):
    with LOCK:            # never acquired in the child: the holder thread does not exist there
        return i


if __name__ == "__main__":
    threading.Thread(target=holder, name="lock-holder", daemon=True).start()
    time.sleep(0.2)
    with mp.get_context("fork").Pool(2) as pool:
        print(pool.map(child, range(4)), flush=True)
