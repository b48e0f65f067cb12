"""Test helper run by `gpuscope run`: creates a 1 MiB shared memory segment, takes it away from
the resource tracker (so nothing unlinks it), creates and unlinks a second one, and leaves a
`setsid` sleeper; prints the segment's name and the sleeper's pid."""

import subprocess
from multiprocessing import resource_tracker, shared_memory

if __name__ == "__main__":
    seg = shared_memory.SharedMemory(create=True, size=1 << 20)        # LEAK-LINE
    resource_tracker.unregister(seg._name, "shared_memory")
    tidy = shared_memory.SharedMemory(create=True, size=4096)
    tidy.close()
    tidy.unlink()
    sleeper = subprocess.Popen(["setsid", "sleep", "600"])
    print("segment", seg.name, "sleeper", sleeper.pid, flush=True)
    seg.close()
