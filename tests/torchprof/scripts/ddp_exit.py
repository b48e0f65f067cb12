"""A gloo DDP training loop that ends the usual way: destroy_process_group(), then main() returns and
the model (whose reducer still holds the process group) is freed: no barrier, no del model.
``--hold-gil``: the main thread gives the GIL up only when it blocks (a huge switch interval), as a
program busy in C code would: a gloo worker waiting for the GIL then waits until the teardown."""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
if "--hold-gil" in sys.argv:
    sys.setswitchinterval(1000.0)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                                        torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        loss = model(torch.randn(8, 16, generator=data)).square().mean()
        if step == STEPS - 1:   # printed before the last backward: no write between it and the end
            print(f"rank {rank} loss {loss.item():.6f}", flush=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
