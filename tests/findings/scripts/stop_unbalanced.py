"""One 8 s task and five of 0.2 s on a 2-worker spawn pool: one worker does the long task while the
other, done after 1 s, waits. Stopped mid-run (SIGINT reaches the workers: the long task's range
ends at the stop)."""
import multiprocessing as mp
import time


def ready(barrier):
    barrier.wait()


def work(seconds):
    time.sleep(seconds)
    return seconds


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    with ctx.Pool(2, initializer=ready, initargs=(ctx.Barrier(2),)) as pool:
        print(sum(pool.map(work, [8.0] + [0.2] * 5, chunksize=1)), flush=True)
