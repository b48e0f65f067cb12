"""Two children of a multiprocessing parent die by SIGSEGV and SIGKILL; one exits cleanly."""
import multiprocessing as mp
import os
import signal


def die(sig):
    if sig:
        os.kill(os.getpid(), sig)


if __name__ == "__main__":
    procs = [mp.Process(target=die, args=(s,)) for s in (signal.SIGSEGV, signal.SIGKILL, 0)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print([p.exitcode for p in procs], flush=True)
