"""RunSpec: what to run and how, validated once with clear errors.

Everything that launches a run (the CLI, the app, tests) builds a :class:`RunSpec`, calls
:meth:`RunSpec.validated` and hands the result to :mod:`gpuscope.runs`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from gpuscope.errors import UserError
from gpuscope.spec_checks import (LAUNCHERS, NSYS_TIMEOUT_S, NSYS_TRACE, START_METHODS,
                                  checked_python as _checked_python, checked_ranks, checked_schedule,
                                  checked_script as _checked_script)


class NsysOptions(NamedTuple):
    """How to record a run under Nsight Systems."""

    enabled: bool = False
    trace: tuple[str, ...] = NSYS_TRACE
    extra_args: tuple[str, ...] = ()
    # None: on for fork runs (gpuscope re-registers NVTX strings in fork children), off otherwise.
    trace_fork: bool | None = None
    timeout_s: float = NSYS_TIMEOUT_S

    def fork_tracing(self, start_method: str) -> bool:
        if self.trace_fork is not None:
            return self.trace_fork
        return start_method in ("fork", "default")


class TorchProfileOptions(NamedTuple):
    """``--torch-profile``: torch.profiler in the run's torch processes (docs/TORCH-PROFILER.md)."""

    enabled: bool = False
    ranks: tuple[int, ...] | None = None        # None: every torch process of the run
    schedule: tuple[int, ...] | None = None     # WAIT, WARMUP, ACTIVE, REPEAT optimizer steps; None: all
    shapes: bool = False
    memory: bool = False
    stack: bool = False

    def validated(self) -> TorchProfileOptions:
        """The options checked (UserError, one line); the sub-options need ``--torch-profile``."""
        if not self.enabled:
            if self != TorchProfileOptions():
                raise UserError("the --torch-profile-* options need --torch-profile")
            return self
        return self._replace(ranks=checked_ranks(self.ranks), schedule=checked_schedule(self.schedule))

    def env_value(self) -> str:
        """What the hook reads (GPUSCOPE_TORCH_PROFILE, inject/torchprof.py)."""
        import json

        return json.dumps({"ranks": None if self.ranks is None else list(self.ranks),
                           "schedule": None if self.schedule is None else list(self.schedule),
                           "shapes": self.shapes, "memory": self.memory, "stack": self.stack})

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TorchProfileOptions:
        d = d or {}
        ranks, steps = d.get("ranks"), d.get("schedule")
        return cls(enabled=bool(d.get("enabled")), ranks=None if ranks is None else tuple(int(r) for r in ranks),
                   schedule=None if steps is None else tuple(int(s) for s in steps), shapes=bool(d.get("shapes")),
                   memory=bool(d.get("memory")), stack=bool(d.get("stack")))


class RunSpec(NamedTuple):
    """A script (or a module, run as ``python -m MODULE``) and the way gpuscope should launch it.

    For a module run ``module`` holds the module's name and ``script`` the text ``-m MODULE``
    (what history and tables show); :attr:`is_module` tells the two apart.
    """

    script: str
    args: tuple[str, ...] = ()
    cwd: str | None = None
    python: str | None = None
    start_method: str = "default"
    launcher: str = "python"
    nproc: int = 1
    annotate: tuple[str, ...] = ()
    nsys: NsysOptions = NsysOptions()
    env: tuple[tuple[str, str], ...] = ()
    # Costly per-process sampling (USS) is off by default; see gpuscope.telemetry.
    sample_interval_s: float = 0.1
    module: str | None = None
    # torchrun across nodes (docs/MULTINODE.md): one gpuscope run per node, all writing into job_dir
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None       # HOST:PORT of torchrun's c10d rendezvous
    rdzv_id: str | None = None             # the job id every node shares
    rdzv_timeout_s: int | None = None      # torchrun's join_timeout (None: torchrun's default, 600 s)
    job_dir: str | None = None             # shared folder the node runs are copied into
    torch_profile: TorchProfileOptions = TorchProfileOptions()
    # modules the forkserver imports once for all its children (multiprocessing.set_forkserver_preload)
    forkserver_preload: tuple[str, ...] = ()

    @property
    def multinode(self) -> bool:
        """A node of a torchrun job across nodes (``--nnodes`` or ``--job-dir`` given)."""
        return self.nnodes > 1 or bool(self.job_dir)

    @property
    def is_module(self) -> bool:
        return bool(self.module)

    @property
    def target_args(self) -> list[str]:
        """What follows the interpreter (or torchrun's options): ``script`` or ``-m MODULE``."""
        return ["-m", str(self.module)] if self.module else [self.script]

    # -- validation -------------------------------------------------------------------------
    def validated(self) -> RunSpec:
        """Resolve paths and check every field; raises UserError with a one-line message."""
        if self.start_method not in START_METHODS:
            raise UserError(f"unknown start method {self.start_method!r}; choose one of {', '.join(START_METHODS)}")
        if self.launcher not in LAUNCHERS:
            raise UserError(f"unknown launcher {self.launcher!r}; choose python or torchrun")
        if not (1 <= int(self.nproc) <= 512):
            raise UserError(f"--nproc must be between 1 and 512, not {self.nproc}")
        if not (0.02 <= self.sample_interval_s <= 1.0):
            raise UserError("the sampling interval must be between 0.02 s and 1 s (1-50 Hz)")
        cwd = Path(self.cwd).expanduser() if self.cwd else Path.cwd()
        if not cwd.is_dir():
            raise UserError(f"working directory not found: {cwd}")
        cwd = cwd.resolve()
        python = _checked_python(self.python)
        for pattern in self.annotate:
            if ":" not in pattern or not pattern.split(":", 1)[1]:
                raise UserError(f"--annotate takes MODULE:QUALNAME (globs allowed), not {pattern!r}")
        preload = tuple(_checked_module(m, "--forkserver-preload") for m in self.forkserver_preload)
        common = dict(cwd=str(cwd), python=python, args=tuple(self.args), annotate=tuple(self.annotate),
                      nproc=int(self.nproc), forkserver_preload=preload, **_checked_nodes(self, cwd))
        common["torch_profile"] = self.torch_profile.validated()
        if self.module:
            return self._replace(script=f"-m {_checked_module(self.module)}",
                                 module=_checked_module(self.module), **common)
        return self._replace(script=str(_checked_script(self.script, cwd)), **common)

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = self._asdict()
        d["nsys"], d["torch_profile"] = self.nsys._asdict(), self.torch_profile._asdict()
        d["env"] = dict(self.env)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSpec:
        d = dict(d)
        nsys = d.pop("nsys", None) or {}
        torch_profile = TorchProfileOptions.from_dict(d.pop("torch_profile", None))
        nsys_opts = NsysOptions(
            enabled=bool(nsys.get("enabled", False)),
            trace=tuple(nsys.get("trace", NSYS_TRACE)),
            extra_args=tuple(nsys.get("extra_args", ())),
            trace_fork=nsys.get("trace_fork"),
            timeout_s=float(nsys.get("timeout_s", NSYS_TIMEOUT_S)),
        )
        known = set(cls._fields)
        kwargs = {k: v for k, v in d.items() if k in known}
        kwargs["args"] = tuple(kwargs.get("args", ()))
        kwargs["annotate"] = tuple(kwargs.get("annotate", ()))
        kwargs["forkserver_preload"] = tuple(kwargs.get("forkserver_preload", ()))
        kwargs["env"] = tuple(sorted((kwargs.get("env") or {}).items()))
        return cls(nsys=nsys_opts, torch_profile=torch_profile, **kwargs)


_ENDPOINT = r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.:-]+?):(?P<port>[0-9]{1,5})"


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as (host, port); UserError if it is not one."""
    m = re.fullmatch(_ENDPOINT, endpoint.strip())
    if not m or not (1 <= int(m["port"]) <= 65535):
        raise UserError(f"--rdzv-endpoint takes HOST:PORT (the c10d rendezvous), not {endpoint!r}")
    return m["host"].strip("[]"), int(m["port"])


def _checked_nodes(spec: RunSpec, cwd: Path) -> dict[str, Any]:
    """The multi-node fields, checked (all defaults for a one-machine run)."""
    nnodes, node_rank = int(spec.nnodes), int(spec.node_rank)
    if not (1 <= nnodes <= 4096):
        raise UserError(f"--nnodes must be between 1 and 4096, not {nnodes}")
    if not spec.multinode:
        if node_rank or spec.rdzv_endpoint or spec.rdzv_id or spec.rdzv_timeout_s is not None:
            raise UserError("--node-rank / --rdzv-* are for a job across nodes: give --job-dir DIR "
                            "(and --nnodes N) as well")
        return {}
    if spec.launcher != "torchrun":
        raise UserError("--nnodes / --job-dir need --launcher torchrun")
    if not (0 <= node_rank < nnodes):
        raise UserError(f"--node-rank must be between 0 and {nnodes - 1} for --nnodes {nnodes}, not {node_rank}")
    if nnodes > 1 and not spec.rdzv_endpoint:
        raise UserError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT (or run it under SLURM's srun)")
    endpoint = None
    if spec.rdzv_endpoint:
        host, port = split_endpoint(spec.rdzv_endpoint)
        endpoint = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if not spec.job_dir:
        raise UserError("a run across nodes needs --job-dir DIR (a folder every node can write: a shared file system)")
    job_dir = Path(spec.job_dir).expanduser()
    job_dir = (job_dir if job_dir.is_absolute() else cwd / job_dir)
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the job folder {job_dir}: {exc.strerror}") from None
    if not os.access(job_dir, os.W_OK | os.X_OK):
        raise UserError(f"the job folder {job_dir} is not writable")
    rdzv_id = (spec.rdzv_id or "gpuscope").strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", rdzv_id):
        raise UserError(f"--rdzv-id takes letters, digits, '_', '.' and '-', not {spec.rdzv_id!r}")
    timeout = spec.rdzv_timeout_s
    if timeout is not None and not (1 <= int(timeout) <= 86400):
        raise UserError(f"--rdzv-timeout must be between 1 s and 1 day, not {timeout}")
    return dict(nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=endpoint, rdzv_id=rdzv_id,
                rdzv_timeout_s=None if timeout is None else int(timeout), job_dir=str(job_dir.resolve()))


_MODULE_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"


def _checked_module(module: str, flag: str = "-m") -> str:
    """A dotted module name (whether it exists is the interpreter's to say, in the run)."""
    name = module.strip()
    if not re.fullmatch(_MODULE_NAME, name):
        raise UserError(f"{flag} takes a module name such as package.module, not {module!r}")
    return name
