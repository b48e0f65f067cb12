"""The workload of bench_run_overhead.py: a 2-worker spawn pool doing NVTX-annotated CPU work."""
import multiprocessing as mp
import sys

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
