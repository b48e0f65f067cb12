"""A spawn-context lock (a named semaphore the resource tracker watches) never released: the program
ends with os._exit, so its finalizer never unregisters it; the tracker warns at shutdown."""
import multiprocessing as mp
import os

if __name__ == "__main__":
    lock = mp.get_context("spawn").Lock()
    print("lock", lock, flush=True)
    os._exit(0)
