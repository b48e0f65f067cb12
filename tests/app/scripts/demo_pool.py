"""The README screenshots' workload: a main process and a spawn Pool(2), nested NVTX ranges."""
import multiprocessing as mp
import sys
import time

import nvtx


def busy(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def task(i):
    with nvtx.annotate("item", color="blue"):
        with nvtx.annotate("load", color="orange"):
            time.sleep(0.05)
        with nvtx.annotate("compute", color="green"):
            busy(0.15 + 0.05 * (i % 3))
        buf = bytearray(8 << 20) if i % 4 == 0 else b""   # some RSS movement
    print(f"task {i:2d} done in {mp.current_process().name}", flush=True)
    return len(buf)


if __name__ == "__main__":
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with nvtx.annotate("setup", color="cyan"):
        time.sleep(0.3)
    with mp.Pool(2) as pool:
        for epoch in range(epochs):
            with nvtx.annotate(f"epoch {epoch}", color="purple"):
                pool.map(task, range(8 * epoch, 8 * epoch + 8), chunksize=1)
                with nvtx.annotate("aggregate", color="red"):
                    busy(0.2)
            print(f"epoch {epoch} finished", flush=True)
    print("pool workers finished", file=sys.stderr)
