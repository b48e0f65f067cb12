"""Trigger for `cuda-after-fork` on a machine without a GPU: a TEST DOUBLE of torch (gpu_double/)
stands in for torch.cuda; the parent initialises "CUDA" on line 13, then starts a fork pool."""
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_double"))
import torch  # noqa: E402  (the double)

assert torch.__version__.endswith("test-double")

if __name__ == "__main__":
    torch.cuda.init()
    with mp.get_context("fork").Pool(2) as pool:
        print("sum", sum(pool.map(abs, range(8))))
