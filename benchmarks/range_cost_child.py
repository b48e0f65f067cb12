"""Run under `gpuscope run`: measures, inside a multiprocessing child, the cost of one recorded
range (a call of an @nvtx.annotate-decorated function) beside nvtx's own annotate, same process."""
import json
import multiprocessing as mp
import sys
import timeit

import nvtx

N = 200_000
REPEAT = 7


def measure(q):
    inject = sys.modules.get("_gpuscope_inject.nvtxwrap")
    original = inject._orig["annotate"] if inject else nvtx.annotate

    def bare():
        pass

    plain = original("plain")(bare)       # nvtx's own decorator (calls libnvtx push/pop)
    recorded = nvtx.annotate("recorded")(bare)   # what the script gets under gpuscope

    def best(fn):
        return min(timeit.repeat(fn, number=N, repeat=REPEAT)) / N * 1e9

    # interleave to share the machine's noise
    rows = {"bare_ns": [], "nvtx_ns": [], "gpuscope_ns": []}
    for _ in range(3):
        rows["bare_ns"].append(best(bare))
        rows["nvtx_ns"].append(best(plain))
        rows["gpuscope_ns"].append(best(recorded))
    q.put({k: min(v) for k, v in rows.items()} | {"injected": inject is not None})


if __name__ == "__main__":
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=measure, args=(q,))
    p.start()
    print(json.dumps(q.get()))
    p.join()
