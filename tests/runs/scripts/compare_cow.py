"""The parent fills 96 MiB before its Pool(2) starts; each task only reads a byte of it and waits
0.8 s. A fork worker shares those pages with the parent (copy on write): its RSS counts them, its
USS does not."""
import multiprocessing as mp
import time

DATA = bytearray(96 << 20)
for i in range(0, len(DATA), 4096):
    DATA[i] = 1


def work(i):
    time.sleep(0.8)
    return DATA[i * 4096]


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print(sum(pool.map(work, [1, 2], chunksize=1)))
