"""Test helper run by `gpuscope run`: leaves a double-forked, setsid Python sleeper behind and
exits; prints the sleeper's pid."""

import os
import sys
import time

if __name__ == "__main__":
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"])
        os.write(w, str(grandchild).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    print("sleeper", int(os.read(r, 64)), flush=True)
    time.sleep(0.5)
