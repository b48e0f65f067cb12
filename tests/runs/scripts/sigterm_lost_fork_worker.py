"""Fork pool workers that do not act on the first SIGTERM (as when it lands just before a worker
blocks in the task queue's lock: a Python handler then never runs), only on the next one:
terminate() must still end them, not wait for their 60 s task."""
import multiprocessing as mp
import signal
import time


def init():
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def first_one_lost(signum, frame):
        seen.append(signum)
        if len(seen) < 2:
            return
        if callable(before):
            before(signum, frame)   # gpuscope's own handler under --nsys (C exit, exit code 143)
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, first_one_lost)


def task(_):
    time.sleep(60)


if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(2, initializer=init)
    pool.map_async(task, [0, 1])
    time.sleep(2)
    t = time.monotonic()
    pool.terminate()
    print(f"terminated in {time.monotonic() - t:.1f} s", flush=True)
