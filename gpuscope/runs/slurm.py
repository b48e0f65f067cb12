"""The torchrun-across-nodes options SLURM already knows (``srun gpuscope run ...``).

When ``gpuscope run --launcher torchrun --job-dir DIR`` runs without ``--nnodes``, ``--node-rank``,
``--rdzv-endpoint`` or ``--rdzv-id``, each absent one is read from the step's environment:

==================  ==============================================================================
``--nnodes``        ``SLURM_STEP_NUM_NODES`` (the srun step's), else ``SLURM_NNODES``, else
                    ``SLURM_JOB_NUM_NODES``
``--node-rank``     ``SLURM_NODEID``
``--rdzv-id``       ``SLURM_JOB_ID``
``--rdzv-endpoint`` ``MASTER_ADDR:MASTER_PORT`` when set, else the first host of the step's node
                    list (``SLURM_STEP_NODELIST``, ``SLURM_NODELIST``, ``SLURM_JOB_NODELIST``)
                    and port ``MASTER_PORT`` or 29500
==================  ==============================================================================
"""

from __future__ import annotations

import re
from typing import Mapping

DEFAULT_PORT = 29500


def expand_nodelist(text: str) -> list[str]:
    """SLURM's compressed host list as host names: ``gpu[01-03,7],login2`` -> gpu01 gpu02 gpu03 gpu7 login2."""
    hosts: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", text.strip()):
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            hosts.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                hosts.append(f"{prefix}{lo}{suffix}")
                continue
            width = len(lo) if lo.startswith("0") else 0
            hosts.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
    return [h for h in hosts if h]


def node_options(env: Mapping[str, str]) -> dict[str, object]:
    """What SLURM's variables say of nnodes, node_rank, rdzv_id and rdzv_endpoint (only what it says)."""
    if not env.get("SLURM_JOB_ID"):
        return {}
    out: dict[str, object] = {"rdzv_id": env["SLURM_JOB_ID"]}
    nnodes = env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES")
    if nnodes and nnodes.isdigit():
        out["nnodes"] = int(nnodes)
    if (env.get("SLURM_NODEID") or "").isdigit():
        out["node_rank"] = int(env["SLURM_NODEID"])
    port = env.get("MASTER_PORT") or str(DEFAULT_PORT)
    if env.get("MASTER_ADDR"):
        out["rdzv_endpoint"] = f"{env['MASTER_ADDR']}:{port}"
    else:
        hosts = expand_nodelist(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST")
                                or env.get("SLURM_JOB_NODELIST") or "")
        if hosts:
            out["rdzv_endpoint"] = f"{hosts[0]}:{port}"
    return out
