"""TEST DOUBLE of torch.utils.data.dataloader: starts fork workers from a torch/utils/data frame,
as the real DataLoader does (its workers do not touch CUDA)."""
import multiprocessing as mp


def _worker(i):
    return i


def start_workers(n):
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(i,)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return [p.exitcode for p in procs]
