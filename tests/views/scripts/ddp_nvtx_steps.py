"""A 2-rank gloo DDP training loop with an NVTX range per step and no profiler in it (gpuscope run
--torch-profile adds one). Rank 1 does extra work inside a "slow part" range from step 3 on."""

import time

import nvtx
import torch
import torch.distributed as dist

STEPS = 6


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    for step in range(STEPS):
        with nvtx.annotate(f"step {step}", color="green"):
            if rank == 1 and step >= 3:
                with nvtx.annotate("slow part", color="red"):
                    time.sleep(0.02)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    # Let gloo's worker threads drop their last work before the process group goes: with a profiler
    # on, a work freed there while the main thread joins them at teardown can deadlock on the GIL.
    dist.barrier()
    time.sleep(0.2)
    del model, opt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
