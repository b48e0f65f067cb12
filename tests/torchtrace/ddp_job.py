"""A 2-rank gloo DDP training loop that profiles itself with torch.profiler (run by the tests).

Three profiling cycles, each a trace per rank: ``cycle0`` balanced, ``cycle1`` rank ``--slow-rank``
does extra work in every step (the other waits in allreduce), ``cycle2`` every step waits for a slow
DataLoader. Each rank writes ``cycle<C>/rank<R>.<pid>.pt.trace.json[.gz]`` and beside it
``...key_averages.json`` (torch's own ``key_averages`` of the same profile: the tests' reference).
Usage: python ddp_job.py OUT_DIR [--ranks 2] [--steps 3] [--gz] [--slow-rank 1] [--port P]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule


def _averages(prof: profile, by_shapes: bool) -> list[dict]:
    return [{"name": e.key, "shapes": str(e.input_shapes) if by_shapes else "", "count": e.count,
             "self_cpu_us": e.self_cpu_time_total, "cpu_total_us": e.cpu_time_total,
             "self_cpu_mem": e.self_cpu_memory_usage, "cpu_mem": e.cpu_memory_usage}
            for e in prof.key_averages(group_by_input_shape=by_shapes)]


class SlowData(torch.utils.data.Dataset):
    """Items that take a while to load in cycle 2 only (``slow`` is set by the loop)."""

    slow = False

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if SlowData.slow:
            time.sleep(0.006)
        return torch.ones(64), torch.zeros(8)


def worker(rank: int, world: int, out: str, steps: int, gz: bool, slow_rank: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # one intra-op thread per rank, as torchrun's OMP_NUM_THREADS=1: two ranks whose thread pools
    # each take every core make the balanced cycle's matrix products uneven on a shared machine
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = iter(torch.utils.data.DataLoader(SlowData(), batch_size=32))
    cycle = [0]

    def ready(prof: profile) -> None:
        folder = os.path.join(out, f"cycle{cycle[0]}")
        os.makedirs(folder, exist_ok=True)
        stem = os.path.join(folder, f"rank{rank}.{os.getpid()}")
        cycle[0] += 1
        prof.export_chrome_trace(stem + (".pt.trace.json.gz" if gz else ".pt.trace.json"))
        with open(stem + ".key_averages.json", "w") as f:
            json.dump({"plain": _averages(prof, False), "shapes": _averages(prof, True),
                       "async": [[e.name, e.time_range.start, e.time_range.end, e.thread] for e in prof.events()
                                 if e.is_async]}, f)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=3), on_trace_ready=ready) as prof:
        for i in range(3 * (steps + 1)):
            SlowData.slow = i >= 2 * (steps + 1)
            x, y = next(batches)
            with torch.profiler.record_function("equal_part"):
                time.sleep(0.1)               # the same on every rank: a step long beside scheduling noise
            if rank == slow_rank and steps + 1 <= i < 2 * (steps + 1):
                with torch.profiler.record_function("slow_part"):
                    time.sleep(0.15)          # this rank's extra work: the others wait in allreduce
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--gz", action="store_true")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--port", type=int, default=29533)
    a = p.parse_args()
    mp.spawn(worker, args=(a.ranks, a.out, a.steps, a.gz, a.slow_rank, a.port), nprocs=a.ranks)


if __name__ == "__main__":
    main()
