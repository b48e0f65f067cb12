"""torchrun ranks without collectives: rank 0 trains two steps and ends; rank 1 trains two steps,
waits until rank 0's trace is saved (gpuscope's meta file says so), then kills itself (SIGKILL)."""
import glob
import json
import os
import signal
import time

import torch

rank = int(os.environ["RANK"])
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
print(f"rank {rank} trained", flush=True)
if rank == 1:
    deadline = time.monotonic() + 120
    pattern = os.path.join(os.environ.get("GPUSCOPE_RUN_DIR", "."), "torch", "rank0-*.meta.json")
    while time.monotonic() < deadline:
        metas = [json.load(open(p)) for p in glob.glob(pattern)]
        if metas and metas[0].get("state") == "saved":
            break
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)
