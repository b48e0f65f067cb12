"""Works in NVTX-annotated rounds and takes its time to stop: the first SIGINT only sets a flag,
and it goes on for up to 20 more rounds (a training loop finishing its step, saving a checkpoint).
The second-stop test needs a program still running when the second Stop comes."""
import signal
import time

import nvtx

asked = []
signal.signal(signal.SIGINT, lambda *_: asked.append(time.monotonic()))

for i in range(3000):
    with nvtx.annotate("round"):
        t = time.monotonic()
        while time.monotonic() - t < 0.1:
            pass
    print("round", i, flush=True)
    if asked and time.monotonic() - asked[0] > 2.0:
        break
