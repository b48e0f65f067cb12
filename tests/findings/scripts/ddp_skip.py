"""Two-rank gloo job where rank 1 skips a collective (torchrun --nproc 2): after one all_reduce that
both join, rank 0 waits in a second all_reduce while rank 1 is elsewhere (`elsewhere`, sleeping
in short steps). The collective timeout is short (60 s) so that nothing hangs for long; the test
stops the run once the finding names rank 1."""
import datetime
import os
import time

import torch
import torch.distributed as dist


def elsewhere(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.2)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    t = torch.ones(1)
    dist.all_reduce(t)                      # both ranks: the group works
    print(f"rank {rank} pid {os.getpid()} joined the first all_reduce", flush=True)
    if rank == 1:
        elsewhere(60)                       # skips the collective below
    else:
        dist.all_reduce(t)                  # waits for rank 1, which never comes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
