"""Rules on what the injected hook saw of torch: a fork after CUDA was initialised, and a
``DistributedSampler`` iterated again with the same epoch.

- ``cuda-after-fork``: the ``cuda_at_fork`` I line (``gpuscope/inject/cudawatch.py``): the process
  forked while ``torch.cuda.is_initialized()``; names the program's line that initialised CUDA.
  Forks of a torch DataLoader starting its workers are no finding by themselves (workers that do
  not touch CUDA work): only with the children's failure message.
  Children that touch CUDA fail with "Cannot re-initialize CUDA in forked subprocess" (that
  message alone is the stderr rule of ``output_rules``; both together make one error).
- ``sampler-epoch-not-set``: the ``sampler_epochs`` I line (``gpuscope/inject/samplerwatch.py``):
  a shuffling sampler iterated again with an epoch value it had already used.
"""

from __future__ import annotations

from typing import Any, Sequence

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.trace.events import ProcessEvents
from gpuscope.findings.registry import Input, RunInputs, rule


def cuda_after_fork(events: list[ProcessEvents], stderr_findings: Sequence[Finding] = ()) -> list[Finding]:
    """One finding per process that forked with CUDA initialised; the stderr message, if any, joins it."""
    message = next((f for f in stderr_findings if f.code == "cuda-after-fork"), None)
    out = []
    for pe in events:
        rec = pe.cuda_at_fork
        if not rec:
            continue
        site = rec.get("init_site")
        forks = int(rec.get("forks") or 0)
        loader = int(rec.get("dataloader_forks") or 0)
        if not forks and message is None:
            continue        # only DataLoader workers, none failed: the usual pattern (workers without CUDA)

        forks = forks or loader
        excerpts = [f"CUDA initialised by {site}" if site else "CUDA was initialised before torch.cuda was imported "
                    "under gpuscope's hook (the call is unknown)"]
        numbers: dict[str, float] = {"forks after CUDA init": forks}
        if message is not None:
            excerpts += list(message.evidence.excerpts)
            numbers["children that failed"] = message.evidence.number("messages") or 1
        from gpuscope.fix import SetStartMethod   # loaded with the finding that offers it, not with every run's rules
        out.append(Finding(
            "cuda-after-fork",
            f"{pe.role} {pe.pid} forked {forks} time(s) after CUDA was initialised in it"
            + (f" (by {site})" if site else "") + ": a CUDA context does not survive fork, children that use "
            "CUDA fail (\"Cannot re-initialize CUDA in forked subprocess\") or hang",
            "use the spawn start method (multiprocessing.set_start_method('spawn') or get_context('spawn'); "
            "DataLoader(multiprocessing_context='spawn')), or initialise CUDA only after the workers are started",
            Severity.ERROR if message is not None else Severity.WARNING, (pe.pid,),
            evidence(numbers, excerpts, [pe.pid]), SetStartMethod("spawn"),
            int(rec["t_wall_ns"]) if rec.get("t_wall_ns") else None))
    return out


def merge_cuda_message(found: list[Finding]) -> list[Finding]:
    """The stderr-only ``cuda-after-fork`` is dropped when a fork record names the process and call."""
    if any(f.code == "cuda-after-fork" and f.pids for f in found):
        return [f for f in found if not (f.code == "cuda-after-fork" and not f.pids)]
    return found


def sampler_epoch_not_set(events: list[ProcessEvents]) -> list[Finding]:
    """Processes (ranks) whose shuffling DistributedSampler repeated an epoch: one finding for all."""
    rows: list[tuple[ProcessEvents, dict[str, Any]]] = [
        (pe, s) for pe in events if (s := pe.sampler_epochs) is not None and s.get("repeats")]
    if not rows:
        return []
    repeats = max(int(s["repeats"]) for _, s in rows)
    site = next((s.get("site") for _, s in rows if s.get("site")), None)
    epochs = rows[0][1].get("epochs") or []
    who = ", ".join(f"{pe.role} {pe.pid}" for pe, _ in rows[:4]) + (" …" if len(rows) > 4 else "")
    return [Finding(
        "sampler-epoch-not-set",
        f"a shuffling DistributedSampler was iterated {repeats} more time(s) with an epoch it had already used "
        f"(epochs {epochs}) in {who}: without set_epoch every epoch sees the same order"
        + (f" ({site})" if site else ""),
        "call sampler.set_epoch(epoch) at the start of every epoch, before iterating the DataLoader",
        Severity.WARNING, tuple(pe.pid for pe, _ in rows),
        evidence({"repeated epochs": repeats, "processes": len(rows)},
                 ([f"iterated from {site}"] if site else []) + [f"{pe.role} {pe.pid}: epochs {s.get('epochs')}"
                                                                 for pe, s in rows[:8]],
                 [pe.pid for pe, _ in rows]))]


@rule("cuda-after-fork", inputs={Input.EVENTS, Input.OUTPUT},
      applies=lambda run: any(pe.cuda_at_fork for pe in run.events),
      title="a process forked with CUDA initialised (fork children cannot use it)")
def _cuda_after_fork(run: RunInputs) -> list[Finding]:
    return cuda_after_fork(run.events, run.output)


@rule("sampler-epoch-not-set", inputs=Input.EVENTS, applies=lambda run: any(pe.sampler_epochs for pe in run.events),
      title="a shuffling DistributedSampler repeated an epoch: set_epoch was not called")
def _sampler_epoch_not_set(run: RunInputs) -> list[Finding]:
    return sampler_epoch_not_set(run.events)
