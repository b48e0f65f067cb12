"""A Ray program that keeps every object it puts (references kept alive) until the object store
spills to disk: the seed case of a node's disk filling with spilled objects. Under gpuscope it
waits, after each put, until gpuscope's object store probe has sampled the store (safety limit),
so the growth is seen whatever the machine's speed; the output is the same with and without."""
import json
import os
import time

import ray

RUN_DIR = os.environ.get("GPUSCOPE_RUN_DIR")   # set for the program's processes by gpuscope run


def samples():
    try:
        with open(os.path.join(RUN_DIR, "ray_store.jsonl")) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return []


DEADLINE = [time.monotonic() + 120.0]   # a safety limit for all the waits together


def wait_for_sample(after_bytes):
    """Until the probe reports the store holding at least ``after_bytes`` (in memory + spilled)."""
    if not RUN_DIR:
        return
    while time.monotonic() < DEADLINE[0]:
        s = samples()
        if s and s[-1]["used"] + s[-1]["spilled_bytes"] >= after_bytes:
            return
        time.sleep(0.2)


def main():
    # address="local": a new local cluster, never one that runs on this machine already
    ray.init(address="local", num_cpus=1, object_store_memory=80 * 2**20, include_dashboard=False,
             log_to_driver=False)
    refs = []
    for i in range(6):
        refs.append(ray.put(b"x" * (20 * 2**20)))
        wait_for_sample((i + 1) * 20 * 2**20)
    print("objects kept", len(refs), "first byte", ray.get(refs[0])[:1])
    ray.shutdown()


if __name__ == "__main__":
    main()
