"""A gloo DDP training loop with no profiler in it: STEPS optimizer steps of a two-Linear model."""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.Generator().manual_seed(rank)
for _step in range(STEPS):
    loss = model(torch.randn(8, 16, generator=data)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank} loss {loss.item():.6f}", flush=True)
dist.destroy_process_group()
