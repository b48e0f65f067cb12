"""Subprocesses that end in each way a Python process can: their statuses must reach the run's rows."""

import subprocess
import sys

CASES = {
    "end": "x = 1",
    "sys_exit": "import sys; sys.exit(3)",
    "sys_exit_text": "import sys; sys.exit('bye')",
    "exception": "raise ValueError('boom')",
    "os_exit": "import os; os._exit(4)",
    "interrupt": "raise KeyboardInterrupt",
}

if __name__ == "__main__":
    for name, code in CASES.items():
        rc = subprocess.run([sys.executable, "-c", f"__name__ = {name!r}\n" + code],
                            stderr=subprocess.DEVNULL).returncode
        print(name, rc, flush=True)
