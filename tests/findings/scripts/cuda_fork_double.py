"""Trigger for `cuda-after-fork` on a machine without a GPU: a TEST DOUBLE of torch (gpu_double/)
stands in for torch.cuda; the parent initialises "CUDA" on line 14, then starts a fork pool.
With `dataloader`: clean, the forks are a (double's) DataLoader starting its workers."""
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_double"))
import torch  # the double

assert torch.__version__.endswith("test-double")

if __name__ == "__main__":
    torch.cuda.init()
    if sys.argv[1:] == ["dataloader"]:
        from torch.utils.data.dataloader import start_workers

        print("workers", start_workers(2))
    else:
        with mp.get_context("fork").Pool(2) as pool:
            print("sum", sum(pool.map(abs, range(8))))
