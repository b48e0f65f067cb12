"""Findings on a Ray run's object store (``ray_store.jsonl``: gpuscope.telemetry.ray_store).

* ``ray-object-store-spilled``: the store spilled objects to disk. Spilled objects live under the
  session's ``ray_spilled_objects`` folder (/tmp/ray by default) until their references go: the
  seed case is a node whose disk filled with spilled objects that the program still referenced.
* ``ray-object-store-growing``: what the store holds (in memory + spilled so far) only grew,
  sample after sample, up to most of its capacity: references kept alive (a list of ObjectRefs,
  results never released).
"""

from __future__ import annotations

import os

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.findings.registry import Input, RunInputs, rule

MIN_SAMPLES = 4          # growth is judged over at least this many samples
FULL_SHARE = 0.8         # ... ending at this share of the store's capacity or more

FIX_REFS = ("release ObjectRefs you no longer need (del them, or keep results, not refs), fetch results in "
            "batches with ray.wait, and pass large data to tasks once (ray.put) instead of per call; "
            "`ray memory` lists what holds each object")


def object_store_findings(run_dir: str | os.PathLike[str]) -> list[Finding]:
    # imported here: a run without Ray's store (the usual one) never loads the telemetry package
    from gpuscope.telemetry.ray_store import mib, read_ray_store, summarize

    samples = read_ray_store(run_dir)
    s = summarize(samples)
    if s is None:
        return []
    out = []
    if s["spilled_bytes"] > 0:
        out.append(Finding(
            "ray-object-store-spilled",
            f"the Ray object store spilled {mib(s['spilled_bytes'])} ({s['spilled_objects']} objects) to disk "
            f"(store: {mib(s['capacity'])}, peak {mib(s['peak_used'])})",
            FIX_REFS + "; or give the store more memory (ray.init(object_store_memory=...)). Spilled objects "
            "stay on the node's disk (the session's ray_spilled_objects folder) while referenced",
            Severity.WARNING, (),
            evidence({"spilled MiB": s["spilled_bytes"] / 2**20, "spilled objects": s["spilled_objects"],
                      "restored MiB": s["restored_bytes"] / 2**20, "store MiB": s["capacity"] / 2**20,
                      "peak used MiB": s["peak_used"] / 2**20})))
    if _grows_without_release(samples, s["capacity"]):
        held = [_held(x) for x in samples]
        out.append(Finding(
            "ray-object-store-growing",
            f"the Ray object store only grew during the run, to {mib(max(held))} held "
            f"({s['peak_objects']} objects in memory at most): references kept alive",
            FIX_REFS, Severity.WARNING, (),
            evidence({"held MiB at start": held[0] / 2**20, "held MiB at end": held[-1] / 2**20,
                      "store MiB": s["capacity"] / 2**20, "samples": len(samples)})))
    return out


def _held(sample: dict[str, int]) -> int:
    """In memory plus spilled so far. Spilled bytes are a running total: an object spilled and then
    restored (or spilled and freed) still counts, so only memory freed in the store lowers this: a
    release of references. (Subtracting restored bytes made a restore, sampled between Ray's
    counters, look like a release.)"""
    return sample["used"] + sample["spilled_bytes"]


def _grows_without_release(samples: list[dict[str, int]], capacity: int) -> bool:
    """What the store holds (in memory + spilled) never fell and rose to most of its capacity."""
    held = [_held(x) for x in samples]
    active = held[next((i for i, h in enumerate(held) if h > 0), len(held)):]
    if len(active) < MIN_SAMPLES or capacity <= 0:
        return False
    never_fell = all(b >= a for a, b in zip(active, active[1:]))
    rises = sum(b > a for a, b in zip(active, active[1:]))
    return never_fell and rises >= 2 and active[-1] >= FULL_SHARE * capacity


def _has_store(run: RunInputs) -> bool:
    from gpuscope import rundir

    return os.path.exists(os.path.join(run.run_dir, rundir.RAY_STORE))


@rule("ray-object-store", codes=("ray-object-store-spilled", "ray-object-store-growing"), inputs=Input.TELEMETRY,
      applies=_has_store, title="Ray's object store spilled to disk, or grew without release")
def _object_store(run: RunInputs) -> list[Finding]:
    return object_store_findings(run.run_dir)
