"""One long task among short ones, handed out in two big chunks: one worker does nearly everything.

Both workers wait at a barrier before taking tasks (so a slow start cannot give both chunks to one
worker), and tasks sleep (not spin), so their durations hold on a loaded machine too."""
import multiprocessing as mp
import time


def ready(barrier):
    barrier.wait()


def work(seconds):
    time.sleep(seconds)
    return seconds


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    tasks = [1.0] + [0.05] * 7
    with ctx.Pool(2, initializer=ready, initargs=(ctx.Barrier(2),)) as pool:
        print(sum(pool.map(work, tasks, chunksize=4)), flush=True)
