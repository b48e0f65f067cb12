"""The object store rules on sample series (real Ray runs: tests/runs/test_ray.py). The series
below are the ones `ray_spill.py` and a program that drops its references produce."""

from __future__ import annotations

import json

from gpuscope.findings.ray_rules import object_store_findings

MIB = 2**20
CAP = 80 * MIB


def _write(folder, rows):
    with open(folder / "ray_store.jsonl", "w") as fh:
        for i, (used, spilled, restored) in enumerate(rows):
            fh.write(json.dumps({"t_ns": i * 10**9, "used": used * MIB, "capacity": CAP, "spilled_bytes": spilled * MIB,
                                 "spilled_objects": spilled // 20, "restored_bytes": restored * MIB,
                                 "local_objects": used // 20}) + "\n")


def _codes(tmp_path, rows):
    _write(tmp_path, rows)
    return sorted(f.code for f in object_store_findings(tmp_path))


def test_kept_references_spill_and_grow(tmp_path):
    # ray_spill.py: six 20 MiB objects kept, the store spills, one is read back at the end
    rows = [(20, 0, 0), (40, 0, 0), (60, 0, 0), (60, 60, 0), (60, 120, 20)]
    assert _codes(tmp_path, rows) == ["ray-object-store-growing", "ray-object-store-spilled"]


def test_a_restore_is_no_release(tmp_path):
    rows = [(20, 0, 0), (40, 0, 0), (60, 0, 0), (60, 60, 0), (80, 60, 20), (60, 80, 20)]
    assert "ray-object-store-growing" in _codes(tmp_path, rows)


def test_released_references_and_a_small_store_use_are_clean(tmp_path):
    assert _codes(tmp_path, [(20, 0, 0), (40, 0, 0), (60, 0, 0), (20, 0, 0), (40, 0, 0), (60, 0, 0)]) == []
    assert _codes(tmp_path, [(5, 0, 0)] * 6) == []
    assert _codes(tmp_path, []) == []
