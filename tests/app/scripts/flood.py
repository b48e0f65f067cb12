"""Prints N lines as fast as it can (stdout), and every 1000th also to stderr."""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
out = sys.stdout
for i in range(n):
    out.write(f"line {i} of the flood, some text to make it a realistic length\n")
    if i % 1000 == 0:
        print(f"err {i}", file=sys.stderr)
out.flush()
