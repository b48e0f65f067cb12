"""Run under `gpuscope run` (benchmarks/bench_pool_flow_cost.py): the cost of the records behind the
timeline's flow arrows, measured in this injected process against the code paths they sit in.

* T (per task, in a pool worker): the wrapped task-queue ``get`` plus the task's range and its
  per-task flush, as a worker runs them, with a task whose job number is an int (the T line is
  written) and with the same task whose job is None (the one condition that skips it).
* J (per job, in the submitting process): ``ApplyResult.__init__`` as wrapped vs the original.
"""
import json
import multiprocessing.pool as mpp
import sys
import time

N = 20_000
ROUNDS = 15


def noop(x):
    return x


def per_task(wrapped_get) -> float:
    t = time.perf_counter_ns()
    for _ in range(N):
        job, i, func, args, kwds = wrapped_get()
        func(*args, **kwds)
    return (time.perf_counter_ns() - t) / N


class _Pool:
    _cache: dict = {}


def per_job(init) -> float:
    pool = _Pool()
    obj = mpp.ApplyResult.__new__(mpp.ApplyResult)
    t = time.perf_counter_ns()
    for _ in range(N):
        init(obj, pool, None, None)
    pool._cache.clear()
    return (time.perf_counter_ns() - t) / N


def main():
    mw = sys.modules.get("_gpuscope_inject.mpwrap")
    if mw is None:
        print(json.dumps({"injected": False}))
        return
    with_t = mw._wrap_pool_get(lambda: (7, 3, noop, (1,), {}))
    without_t = mw._wrap_pool_get(lambda: (None, 3, noop, (1,), {}))
    wrapped, original = mpp.ApplyResult.__init__, mpp.ApplyResult.__init__.__wrapped__
    rows = {"task_with_T_ns": [], "task_without_T_ns": [], "job_with_J_ns": [], "job_without_J_ns": []}
    for _ in range(ROUNDS):      # alternated rounds share the machine's noise
        rows["task_with_T_ns"].append(per_task(with_t))
        rows["task_without_T_ns"].append(per_task(without_t))
        rows["job_with_J_ns"].append(per_job(wrapped))
        rows["job_without_J_ns"].append(per_job(original))
        mw.STATE.flush()
    # context: a whole job of one task through a real Pool(1) (submit, pickle, run, result)
    with mpp.Pool(1) as pool:
        pool.apply_async(noop, (1,)).get()
        t = time.perf_counter_ns()
        for _ in range(2000):
            pool.apply_async(noop, (1,)).get()
        rows["apply_async_roundtrip_ns"] = [(time.perf_counter_ns() - t) / 2000]
    print(json.dumps({"injected": True, **{k: [round(v, 1) for v in vs] for k, vs in rows.items()}}))


if __name__ == "__main__":
    main()
