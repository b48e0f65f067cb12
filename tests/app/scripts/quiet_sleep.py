"""A quiet program: no output, it sleeps for argv[1] seconds (the GUI-stall tests' run)."""
import sys
import time

time.sleep(float(sys.argv[1]))
