"""Trigger for `large-pickles`: a fork pool whose tasks carry 8 MB each (16 distinct objects:
pickle's memo would send one object repeated in a chunk only once), about 134 MB in all."""
import multiprocessing as mp


def size(block):
    return len(block)


if __name__ == "__main__":
    blocks = [bytes([i]) * (8 << 20) for i in range(16)]
    with mp.get_context("fork").Pool(2) as pool:
        print("sum", sum(pool.map(size, blocks, chunksize=1)))
