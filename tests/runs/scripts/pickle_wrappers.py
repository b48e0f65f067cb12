"""Pickles what gpuscope wraps (an @nvtx.annotate function and method, an annotate object, nvtx's
functions, a multiprocessing function gpuscope patches, an --annotate'd function) by reference and
by value (cloudpickle, as Ray and joblib/loky do), loads them in a Python gpuscope does not inject
(-E, like a worker of a Ray cluster started without gpuscope) and in joblib's loky workers.
Prints the same with and without gpuscope."""
import json
import multiprocessing.pool
import pickle
import subprocess
import sys

import cloudpickle  # what joblib (loky) and Ray pickle __main__ functions with
import nvtx
from joblib import Parallel, delayed


@nvtx.annotate("scaled", color="red")
def scaled(x):
    return 3 * x


@nvtx.annotate()
def plus_one(x):
    return x + 1


class Acc:
    def __init__(self):
        self.total = 0

    @nvtx.annotate("Acc.add", domain="acc")
    def add(self, k):
        self.total += k
        return self.total


def by_flag(x):   # gpuscope run --annotate __main__:by_flag wraps it
    return 10 * x


def fails(x):
    raise ValueError("bad %d" % x)


RECEIVER = r'''
import multiprocessing.pool, pickle, sys
import nvtx
objs = pickle.loads(sys.stdin.buffer.read())
print(objs["scaled"](2), objs["plus_one"](2), objs["by_flag"](2), objs["fails_annotated"].__name__)
acc = objs["Acc"]()
acc.add(2)
print("Acc.add", acc.add(3))
ctx = objs["ctx"]
print(type(ctx).__module__, type(ctx).__name__, type(ctx) is nvtx.annotate)
with ctx:
    print("inside ctx")
print("worker", objs["worker"] is multiprocessing.pool.worker, "push_range", objs["push_range"] is nvtx.push_range)
try:
    objs["fails_annotated"](4)
except ValueError as exc:
    print("raised", exc)
'''


def fresh_python(data):
    """Load in an interpreter gpuscope does not inject (-E ignores PYTHONPATH)."""
    out = subprocess.run([sys.executable, "-E", "-c", RECEIVER], input=data, capture_output=True, timeout=120)
    lines = out.stdout.decode().splitlines()
    if out.returncode:
        lines.append("FAILED: " + (out.stderr.decode().strip().splitlines() or ["?"])[-1])
    return lines


def main():
    objs = {
        "scaled": scaled, "plus_one": plus_one, "by_flag": by_flag, "Acc": Acc,
        "fails_annotated": nvtx.annotate("fails")(fails),
        "ctx": nvtx.annotate("ctx", color="blue", domain="d"),
        "worker": multiprocessing.pool.worker, "push_range": nvtx.push_range, "dumps": json.dumps,
    }
    # by reference: the same objects come back
    for name in ("scaled", "plus_one", "by_flag", "Acc", "worker", "push_range", "dumps"):
        print("pickle", name, pickle.loads(pickle.dumps(objs[name])) is objs[name])
    back = pickle.loads(pickle.dumps(objs["ctx"]))
    print("pickle ctx", type(back).__name__, type(back) is nvtx.annotate)
    # by value (cloudpickle, as Ray and joblib do for __main__): loadable where gpuscope is absent
    data = cloudpickle.dumps(objs)
    for line in fresh_python(data):
        print("fresh:", line)
    same = cloudpickle.loads(data)
    print("cloudpickle here", same["scaled"](5), same["plus_one"](5), same["Acc"]().add(7))
    # joblib (loky workers; __main__ functions travel by value)
    print("joblib", Parallel(n_jobs=2)(delayed(f)(i) for i in range(3) for f in (scaled, plus_one, by_flag)))
    print("joblib method", Parallel(n_jobs=2)(delayed(Acc().add)(i) for i in range(3)))


if __name__ == "__main__":
    main()
