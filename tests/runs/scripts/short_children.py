"""Four multiprocessing children that each live about 10 ms (busy), then one that exits with 3."""

import multiprocessing as mp
import sys
import time


def busy(ms):
    end = time.perf_counter() + ms / 1000
    block = bytearray(4 << 20)           # touch 4 MiB: a peak RSS of its own
    for i in range(0, len(block), 4096):
        block[i] = 1
    while time.perf_counter() < end:
        pass


def fail():
    sys.exit(3)


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "fork"
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=busy, args=(10,), name=f"short-{i}") for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = ctx.Process(target=fail, name="fails-3")
    bad.start()
    bad.join()
    print("exit codes", [p.exitcode for p in procs], bad.exitcode)
