"""TEST DOUBLE of torch (no GPU on the test machine): only what gpuscope's cudawatch touches.

Put on sys.path by tests/findings/scripts/cuda_fork_double.py only; never the real torch.
"""
from . import cuda  # noqa: F401

__version__ = "0.0-gpuscope-test-double"
