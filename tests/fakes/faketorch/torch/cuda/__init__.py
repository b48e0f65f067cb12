"""FAKE torch.cuda (TEST DOUBLE) with the real lazy-initialization shape: ``_lazy_init`` sets
``_initialized``; ``is_initialized`` reports it; allocator counters come from ``MEM``."""

_initialized = False
MEM = {0: {"allocated": 0, "reserved": 0, "max_allocated": 0},
       1: {"allocated": 0, "reserved": 0, "max_allocated": 0}}
lazy_init_calls = 0


def _lazy_init():
    global _initialized, lazy_init_calls
    lazy_init_calls += 1
    _initialized = True


def is_initialized():
    return _initialized


def device_count():
    return len(MEM)


def current_device():
    _lazy_init()
    return 0


def memory_allocated(i):
    return MEM[i]["allocated"]


def memory_reserved(i):
    return MEM[i]["reserved"]


def max_memory_allocated(i):
    return MEM[i]["max_allocated"]
