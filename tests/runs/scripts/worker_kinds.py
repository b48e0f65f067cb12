"""Workers people know by name: torch DataLoader workers, a ProcessPoolExecutor, joblib's loky."""

import sys
from concurrent.futures import ProcessPoolExecutor


def square(x):
    return x * x


def main(kinds):
    if "dataloader" in kinds:
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        data = TensorDataset(torch.arange(32, dtype=torch.float32))
        total = sum(float(batch[0].sum()) for batch in DataLoader(data, batch_size=4, num_workers=2))
        print("dataloader sum", total, flush=True)
    if "executor" in kinds:
        with ProcessPoolExecutor(max_workers=2) as ex:
            print("executor", list(ex.map(square, range(6))), flush=True)
    if "loky" in kinds:
        from joblib import Parallel, delayed

        print("loky", Parallel(n_jobs=2, backend="loky")(delayed(square)(i) for i in range(6)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
