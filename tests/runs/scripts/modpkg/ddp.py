"""`torchrun -m modpkg.ddp`: a 2-rank DDP step on CPU (gloo) with AdamW, whose step() is Adam's."""
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(16, 8)).sum().backward()
        opt.step()
    print(f"rank {rank} of {dist.get_world_size()} module {__spec__.name} local {os.environ['LOCAL_RANK']}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
