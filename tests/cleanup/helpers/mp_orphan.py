"""Test helper: start a multiprocessing spawn child that sleeps, print its pid, and exit at once
without joining it (the child and the resource tracker are orphaned). With the argument
``stay`` the parent stays alive instead (nothing is orphaned)."""

import multiprocessing as mp
import os
import sys
import time

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    child = ctx.Process(target=time.sleep, args=(600,))
    child.start()
    print(child.pid, flush=True)
    time.sleep(0.5)
    if sys.argv[1:] == ["stay"]:
        time.sleep(600)
    os._exit(0)
