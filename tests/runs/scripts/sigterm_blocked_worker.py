"""A spawn pool worker whose main thread blocks SIGTERM inside its task (as a signal that lands on
another thread leaves the main thread's wait uninterrupted): terminate() must still end it."""
import multiprocessing as mp
import signal
import time


def task(_):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    time.sleep(60)


if __name__ == "__main__":
    pool = mp.get_context("spawn").Pool(1)
    pool.map_async(task, [0])
    time.sleep(3)
    t = time.monotonic()
    pool.terminate()
    print(f"terminated in {time.monotonic() - t:.1f} s", flush=True)
