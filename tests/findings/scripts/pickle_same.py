"""What multiprocessing pickles, and the error it raises, printed: the same with and without gpuscope."""
import hashlib
import threading
from multiprocessing.reduction import ForkingPickler

data = {"a": list(range(1000)), "b": b"x" * 100_000, "c": ("t", 1.5)}
print("dumps", type(ForkingPickler.dumps(data)).__name__, hashlib.sha256(ForkingPickler.dumps(data)).hexdigest())
print("protocol 2", hashlib.sha256(ForkingPickler.dumps(data, 2)).hexdigest())
try:
    ForkingPickler.dumps(threading.Lock())
except Exception as exc:  # noqa: BLE001 - the error the program would see, printed
    print("error", type(exc).__name__, exc)
print("wrapped name", ForkingPickler.dumps.__name__)
