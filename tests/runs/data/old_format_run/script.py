"""A small pool run (two workers, ranges, one child exit code) for a run folder of the old format."""
import multiprocessing as mp
import subprocess
import sys


def square(x):
    return x * x


if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:
        print(sum(pool.map(square, range(20))))
    subprocess.run([sys.executable, "-c", "import sys; sys.exit(3)"])
