"""A program that profiles itself: an export_chrome_trace and a tensorboard_trace_handler, both into OUT."""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

out = sys.argv[1]
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def step():
    model(torch.randn(2, 8)).sum().backward()
    opt.step()


step()
step()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    with record_function("proc_%d_step" % 0):
        step()
prof.export_chrome_trace(os.path.join(out, "mine.json"))
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=1, repeat=1),
             on_trace_ready=tensorboard_trace_handler(os.path.join(out, "tb"), worker_name="w")) as p2:
    for _ in range(2):
        step()
        p2.step()
table = prof.key_averages().table(row_limit=5)
print("proc_0_step" in table, "gpuscope" in table)
