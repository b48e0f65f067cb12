"""A spawn pool whose script imports nothing heavy: its workers' re-import of __main__ is quick."""
import multiprocessing as mp
import sys


def ready(barrier):
    barrier.wait()        # both workers start (and have re-imported __main__) before any task


def work(i):
    return i * i


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    with ctx.Pool(2, initializer=ready, initargs=(ctx.Barrier(2),)) as pool:
        print(sum(pool.map(work, range(8), chunksize=1)), flush=True)
