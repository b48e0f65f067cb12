"""A module that is slow to import, like a configuration module that reads and validates files."""
import time

time.sleep(0.3)
LIMIT = 20000
