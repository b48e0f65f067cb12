"""`sampler-epoch-not-set` trigger (no argument: set_epoch never called) and clean (`set`): three
epochs over a DataLoader with a shuffling DistributedSampler (rank 0 of 2; no process group needed)."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

if __name__ == "__main__":
    call_set_epoch = sys.argv[1:] == ["set"]
    data = TensorDataset(torch.arange(64))
    sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=1)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    for epoch in range(3):
        if call_set_epoch:
            sampler.set_epoch(epoch)
        first = next(iter(loader))[0][:4].tolist()
        print("epoch", epoch, "first", first)
