"""A program that starts torch.profiler and never stops it (its trace would be lost without gpuscope)."""
import torch
from torch.profiler import ProfilerActivity, profile

model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
prof = profile(activities=[ProfilerActivity.CPU])
prof.start()
for _ in range(3):
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
print("trained")
