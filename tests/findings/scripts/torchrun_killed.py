"""Two torchrun ranks (no torch imported): rank 1 is SIGKILLed; torchrun's failure block reports
"exitcode  : -9 (pid: N)"."""
import os
import signal
import time

if __name__ == "__main__":
    print("rank", os.environ.get("RANK"), "pid", os.getpid(), flush=True)
    if os.environ.get("RANK") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(3)
