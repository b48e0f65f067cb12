"""Ray object store probe: run by gpuscope with the *program's* interpreter (the one that has
Ray), never injected, never imported by gpuscope. Standard library and Ray only.

    python ray_probe.py GCS_ADDRESS INTERVAL_S

Prints one JSON object per line, every INTERVAL_S, with the object store figures of Ray's own
state API (``ray._private.internal_api.get_memory_info_reply``: the GCS and the raylet's
``FormatGlobalMemoryInfo``, what ``ray memory --stats-only`` prints). It joins no job (no
``ray.init``) and ends when gpuscope (its parent) ends or the cluster is gone.
"""
import json
import os
import sys
import time

STATS = {   # our key -> ray.rpc.ObjectStoreStats field
    "used": "object_store_bytes_used",
    "capacity": "object_store_bytes_avail",   # Ray names the capacity "avail" (ray memory: used / avail = % full)
    "primary_bytes": "object_store_bytes_primary_copy",
    "pinned_objects": "num_object_store_primary_copies",
    "local_objects": "num_local_objects",
    "fallback_bytes": "object_store_bytes_fallback",
    "spilled_bytes": "spilled_bytes_total",
    "spilled_objects": "spilled_objects_total",
    "restored_bytes": "restored_bytes_total",
    "created_bytes": "cumulative_created_bytes",
}


def main():
    address, interval = sys.argv[1], float(sys.argv[2])
    parent = os.getppid()
    from ray._private import internal_api

    state = internal_api.get_state_from_address(address)
    misses = 0
    while os.getppid() == parent:
        t0 = time.monotonic_ns()
        try:
            stats = internal_api.get_memory_info_reply(state, timeout_seconds=5.0).store_stats
            line = {key: int(getattr(stats, field, 0)) for key, field in STATS.items()}
            line["t_ns"] = t0
            misses = 0
        except Exception as exc:  # noqa: BLE001 - Ray's errors vary: the cluster is starting, or gone
            misses += 1
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            line = {"t_ns": t0, "error": "%s: %s" % (type(exc).__name__, first)}
            if misses >= 5:
                print(json.dumps(line), flush=True)
                return
        print(json.dumps(line), flush=True)
        time.sleep(max(0.0, interval - (time.monotonic_ns() - t0) / 1e9))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
