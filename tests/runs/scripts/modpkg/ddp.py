"""`torchrun -m modpkg.ddp`: a 2-rank DDP job on CPU (gloo) with NVTX ranges per rank and AdamW,
whose step() it inherits from Adam in current torch (tests/runs/test_torchrun.py)."""
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
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    for _ in range(3):
        step(model, opt, torch.randn(16, 8))
    with nvtx.annotate("all_reduce"):
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t)
    world, local = dist.get_world_size(), os.environ["LOCAL_RANK"]
    print(f"rank {rank} of {world} sum {t.item()} module {__spec__.name} local {local}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
