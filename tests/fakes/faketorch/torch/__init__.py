"""FAKE torch (TEST DOUBLE): just enough of torch.cuda to drive gpuscope.inject.torchmem without a GPU.

Put tests/fakes/faketorch first on sys.path in a test subprocess; never on the real path.
"""

from . import cuda  # noqa: F401  (torch imports torch.cuda eagerly, like the real package)

FAKE = True
