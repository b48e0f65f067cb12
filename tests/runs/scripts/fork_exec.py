"""Children started through fork + exec with a preexec_fn (Python's fork handlers run in the child
before the exec, as Ray starts its processes): one Python program, one program that is not Python."""
import subprocess
import sys


def nothing():
    pass


py = subprocess.run([sys.executable, "-c", "print('child python')"], preexec_fn=nothing, capture_output=True)
print(py.stdout.decode().strip(), py.returncode)
other = subprocess.run(["sleep", "0.5"], preexec_fn=nothing)
print("sleep", other.returncode)
