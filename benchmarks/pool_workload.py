"""The workload of bench_run_overhead.py: a 2-worker spawn pool doing NVTX-annotated CPU work.

    python pool_workload.py [TASKS] [SIZE] [MARKS]

MARKS: a file where the main process notes when its first line ran and when its last exit handler
ran (as the benchmark's empty script does; not the workers, which import this file too)."""
import sys

if __name__ == "__main__" and len(sys.argv) > 3:
    import atexit
    import time

    open(sys.argv[3], "a").write("start %d\n" % time.time_ns())
    # registered before multiprocessing's own exit handler: runs after it (last in, first out)
    atexit.register(lambda: open(sys.argv[3], "a").write("end %d\n" % time.time_ns()))

import multiprocessing as mp

import nvtx


@nvtx.annotate("chunk")
def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


if __name__ == "__main__":
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 400_000
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        print(sum(pool.map(work, [size] * tasks, chunksize=1)))
