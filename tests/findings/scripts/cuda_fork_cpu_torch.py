"""Clean for `cuda-after-fork` with the real torch on a machine without CUDA: torch.cuda is imported
and asked to initialise (it raises, unchanged by gpuscope), CUDA stays uninitialised, then a fork
pool runs."""
import multiprocessing as mp

import torch

if __name__ == "__main__":
    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - CPU-only torch: "Torch not compiled with CUDA enabled"
        print("cuda init failed:", type(exc).__name__, exc)
    print("initialized", torch.cuda.is_initialized())
    with mp.get_context("fork").Pool(2) as pool:
        print("sum", sum(pool.map(abs, range(8))))
