"""The cost of the @nvtx.annotate decorator gpuscope installs against its former form, in one process.

    python -m gpuscope run --quiet benchmarks/decorator_forms_child.py

Issue 13 made the decorated function pickle by value (it holds only an annotate object and calls
its __enter__/__exit__); the former closure (rebuilt here from the injection's own parts) held a
registered-string object that cannot be pickled. 30 alternated rounds of 100k calls each; prints
the median and range of each form and of the per-round difference (new - old).
"""
import functools
import statistics
import sys
import timeit
import nvtx
from _gpuscope_inject.eventlog import STATE, native_tid, now

w = sys.modules["_gpuscope_inject.nvtxwrap"]

def old_style(func, message):
    reg = w._Registered((message, None, None, None, None))
    state, clock, tid = STATE, now, native_tid
    @functools.wraps(func)
    def inner(*args, **kwargs):
        if reg.pid != state.pid:
            reg.resolve()
        reg.push(reg.attrs, reg.handle)
        t0 = clock()
        try:
            return func(*args, **kwargs)
        except BaseException as exc:
            w.hide_frames(exc)
            raise
        finally:
            t1 = clock()
            reg.pop(reg.handle)
            state.buf.append((t0, t1, tid(), reg.nid, "P"))
            if t1 > state.next_flush:
                state.flush()
    return inner

def bare(): pass
plain = w._orig["annotate"]("plain")(bare)
old = old_style(bare, "old")
new = nvtx.annotate("new")(bare)
N = 100_000
res: dict[str, list[float]] = {"bare": [], "nvtx": [], "old": [], "new": []}
for _ in range(30):
    for k, f in (("bare", bare), ("nvtx", plain), ("old", old), ("new", new)):
        res[k].append(timeit.timeit(f, number=N) / N * 1e9)
for k, v in res.items():
    print(k, "median %.0f ns (min %.0f, max %.0f)" % (statistics.median(v), min(v), max(v)))
d = [n - o for n, o in zip(res["new"], res["old"])]
print("new - old per round: median %.0f ns (min %.0f, max %.0f)" % (statistics.median(d), min(d), max(d)))
