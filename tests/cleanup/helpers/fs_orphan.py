"""Test helper: start a forkserver worker that sleeps, print its pid, and exit at once (the
forkserver and its worker are orphaned)."""

import multiprocessing as mp
import os
import time

if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    child = ctx.Process(target=time.sleep, args=(600,))
    child.start()
    print(child.pid, flush=True)
    time.sleep(0.5)
    os._exit(0)
