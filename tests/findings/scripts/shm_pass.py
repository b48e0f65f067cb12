"""Clean for `large-pickles`: the same 134 MB handed to the workers through shared memory; only the
segment's name and offsets are pickled."""
import multiprocessing as mp
from multiprocessing import shared_memory

BLOCK = 8 << 20


def size(args):
    name, i = args
    shm = shared_memory.SharedMemory(name=name)
    try:
        return len(bytes(shm.buf[i * BLOCK:(i + 1) * BLOCK]))
    finally:
        shm.close()


if __name__ == "__main__":
    shm = shared_memory.SharedMemory(create=True, size=16 * BLOCK)
    try:
        for i in range(16):
            shm.buf[i * BLOCK:(i + 1) * BLOCK] = bytes([i]) * BLOCK
        with mp.get_context("fork").Pool(2) as pool:
            print("sum", sum(pool.map(size, [(shm.name, i) for i in range(16)], chunksize=1)))
    finally:
        shm.close()
        shm.unlink()
