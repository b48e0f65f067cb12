"""Torch not imported (``try``: imported if installed): the output is the same with and without
--torch-profile; ends with status 3."""
import json
import sys

have = False
if sys.argv[1:] == ["try"]:
    try:
        import torch  # noqa: F401
        have = True
    except ImportError:
        pass
print(json.dumps({"sum": sum(range(10)), "torch": have}))
sys.exit(3)
