"""Each torchrun rank writes many short lines, one write() per line, as loggers do.

torchrun starts its ranks with `python -u`, so a plain print() there writes its text and its
newline separately (two lines from two ranks can then mix, under plain torchrun as under
gpuscope); one write() of a whole line reaches the terminal whole.
"""
import os
import sys

rank = int(os.environ.get("RANK", "0"))
sys.stdout.write(f"isatty {rank} {sys.stdout.isatty()}\n")
sys.stdout.flush()
for i in range(400):
    sys.stdout.write(f"rank {rank} step {i} loss={-i * 3.7:.3f}\n")
