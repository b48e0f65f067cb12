"""One process: STEPS optimizer steps of a two-Linear model; exits with EXIT (default 0)."""
import sys

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(STEPS):
    loss = model(torch.randn(4, 8)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.6f}", flush=True)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
