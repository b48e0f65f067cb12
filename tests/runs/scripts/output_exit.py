"""Prints text, raw bytes and stderr, reads its argv and __name__, and exits with code 3."""
import os
import sys

print("hello", sys.argv[1:], __name__)
print("file", os.path.basename(__file__), "path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
sys.stdout.flush()
sys.stdout.buffer.write(bytes(range(256)) + b"\n")
sys.stdout.flush()
for i in range(2000):
    print(i, "x" * (i % 50))
print("to stderr", file=sys.stderr)
sys.exit(3)
