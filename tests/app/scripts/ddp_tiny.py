"""Two torchrun ranks on CPU (gloo): one all_reduce inside an NVTX range, then a short wait."""
import time

import nvtx
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
with nvtx.annotate("all_reduce"):
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
time.sleep(1.0)   # long enough for the live view to see both ranks
print(f"rank {rank} sum {t.item()}", flush=True)
dist.destroy_process_group()
