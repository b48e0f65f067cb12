"""Two-rank gloo job (torchrun --nproc 2) where rank 1 is a straggler: its `load_batch` ranges take
120 ms against 20 ms on rank 0; both then meet in an all_reduce per step."""
import datetime
import time

import nvtx
import torch
import torch.distributed as dist


@nvtx.annotate("load_batch")
def load_batch(rank):
    time.sleep(0.12 if rank == 1 else 0.02)
    return torch.ones(4)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    for _ in range(8):
        t = load_batch(rank)
        with nvtx.annotate("sync"):
            dist.all_reduce(t)
    print(f"rank {rank} done {t.sum().item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
