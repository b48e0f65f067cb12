"""Trigger for `left-running`: starts a sleeper in its own session (so it outlives the script) and
ends. The sleeper ends by itself after 120 s; the test kills it as soon as it has checked."""
import subprocess
import sys

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print("sleeper", child.pid, flush=True)
