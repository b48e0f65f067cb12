"""Turn a validated RunSpec into the argv and environment of the run's first process."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, NamedTuple

from gpuscope import rundir as layout
from gpuscope.errors import UserError

if TYPE_CHECKING:
    from pathlib import Path

    from gpuscope.spec import RunSpec


class Command(NamedTuple):
    """The first process of a run: argv, environment and working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


def build_command(spec: RunSpec, run_id: str, run_dir: str | Path, base_env: dict[str, str] | None = None) -> Command:
    """argv and env for ``python script|-m module`` or ``python -m torch.distributed.run``."""
    env = dict(os.environ if base_env is None else base_env)
    env.update(dict(spec.env))
    python = spec.python or "python3"
    if spec.launcher == "torchrun":
        check_torch(python, env)
    env["PYTHONPATH"] = layout.pythonpath_with_boot(env.get("PYTHONPATH"))
    env["GPUSCOPE_RUN_ID"] = run_id
    env["GPUSCOPE_RUN_DIR"] = str(run_dir)
    if spec.is_module:  # the hook tells the process running the module from its command line
        env["GPUSCOPE_MODULE"] = str(spec.module)
        env.pop("GPUSCOPE_SCRIPT", None)
    else:
        env["GPUSCOPE_SCRIPT"] = spec.script
        env.pop("GPUSCOPE_MODULE", None)
    env["GPUSCOPE_START_METHOD"] = spec.start_method
    if spec.annotate:
        env["GPUSCOPE_ANNOTATE"] = "\n".join(spec.annotate)
    else:
        env.pop("GPUSCOPE_ANNOTATE", None)
    if spec.forkserver_preload:   # the hook adds them to the forkserver's preload (inject/reimport.py)
        env["GPUSCOPE_FORKSERVER_PRELOAD"] = ",".join(spec.forkserver_preload)
    else:
        env.pop("GPUSCOPE_FORKSERVER_PRELOAD", None)
    # Nothing else changes: live output comes from a pty (gpuscope.runs.output), not PYTHONUNBUFFERED.
    if spec.launcher == "torchrun":
        argv = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(spec.nproc),
                *_rendezvous_args(spec), *spec.target_args, *spec.args]
    else:
        argv = [python, *spec.target_args, *spec.args]
    return Command(argv=argv, env=env, cwd=spec.cwd or os.getcwd())


def _rendezvous_args(spec: RunSpec) -> list[str]:
    """``--standalone`` on one machine; a c10d rendezvous shared by the nodes of a job across nodes.

    torchrun's c10d rendezvous gives each node its group rank (and so its ranks) in the order nodes
    join; gpuscope's ``--node-rank`` names the node in the job folder, and each rank's process
    records the RANK torchrun gave it. docs/MULTINODE.md."""
    if not spec.multinode or not spec.rdzv_endpoint:
        return ["--standalone"]
    args = ["--nnodes", str(spec.nnodes), "--node-rank", str(spec.node_rank), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", spec.rdzv_endpoint, "--rdzv-id", spec.rdzv_id or "gpuscope"]
    if spec.rdzv_timeout_s is not None:
        args += ["--rdzv-conf", f"join_timeout={spec.rdzv_timeout_s}"]
    return args


def check_torch(python: str, env: dict[str, str]) -> None:
    """torchrun needs torch in the chosen interpreter: say so in one line if it is missing."""
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 3)"
    clean = {k: v for k, v in env.items() if not k.startswith("GPUSCOPE_")}
    try:
        rc = subprocess.run([python, "-c", probe], env=clean, timeout=60,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot start {python} to look for torch: {exc}") from None
    if rc != 0:
        raise UserError(f"--launcher torchrun needs torch, which is not installed for {python} "
                        "(pip install torch)")
