"""Each torchrun rank prints many short lines with plain print() (no flush), as training loops do."""
import os
import sys

rank = int(os.environ.get("RANK", "0"))
print(f"isatty {rank} {sys.stdout.isatty()}", flush=True)
for i in range(400):
    print(f"rank {rank} step {i} loss={-i * 3.7:.3f}")
