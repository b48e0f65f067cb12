"""The Run tab: launch panel, live plots, process tree, console, stacks, and the run controller."""
