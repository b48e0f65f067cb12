"""Logs N lines to stderr one print at a time (as logging does), then one line to stdout."""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
for i in range(n):
    print(f"log {i} of the flood: a warning line as logging writes them", file=sys.stderr)
print(f"out last {n - 1}", flush=True)
