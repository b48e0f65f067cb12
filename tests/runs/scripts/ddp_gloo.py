"""A 2-rank DDP step on CPU with the gloo backend, with NVTX ranges per rank."""
import os

import nvtx
import torch
import torch.distributed as dist


@nvtx.annotate("train_step")
def step(model, opt, x):
    opt.zero_grad()
    loss = model(x).sum()
    loss.backward()
    opt.step()
    return loss.item()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        step(model, opt, torch.randn(16, 8))
    with nvtx.annotate("all_reduce"):
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t)
    print(f"rank {rank} of {dist.get_world_size()} sum {t.item()} local {os.environ['LOCAL_RANK']}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
