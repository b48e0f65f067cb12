"""Identical 8 s tasks on a 2-worker spawn pool whose workers ignore SIGINT (the parent's Ctrl-C
terminates the pool): stopped mid-run, each worker loses the task it was in. The second worker
starts 2.5 s late, so at the stop the first has finished one task more."""
import multiprocessing as mp
import signal
import time


def ready(barrier):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    barrier.wait()
    if mp.current_process()._identity[0] == 2:
        time.sleep(2.5)


def work(seconds):
    time.sleep(seconds)
    return seconds


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    with ctx.Pool(2, initializer=ready, initargs=(ctx.Barrier(2),)) as pool:
        print(sum(pool.map(work, [8.0] * 10, chunksize=1)), flush=True)
