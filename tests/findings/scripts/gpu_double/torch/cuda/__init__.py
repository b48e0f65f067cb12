"""TEST DOUBLE of torch.cuda: ``is_initialized`` and ``_lazy_init`` as torch has them, and ``init``
(torch.cuda.init calls _lazy_init, as real CUDA use does from Python and C++)."""
_initialized = False


def is_initialized():
    return _initialized


def _lazy_init():
    global _initialized
    _initialized = True


def init():
    _lazy_init()
