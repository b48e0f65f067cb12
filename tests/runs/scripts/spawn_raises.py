"""Errors in spawn children: a Process target, a pool task (re-raised in the parent) and the
script's own re-import in a child. Prints every traceback to stderr."""
import multiprocessing as mp
import sys
import traceback


def boom(x):
    raise ValueError("boom %d" % x)


if __name__ == "__mp_main__" and sys.argv[1:] == ["import-error"]:
    raise RuntimeError("fails while the child re-imports the script")

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=boom, args=(1,))
    p.start()
    p.join()
    with ctx.Pool(1) as pool:
        try:
            pool.map(boom, [2])
        except ValueError:
            traceback.print_exc()
    sys.argv[1:] = ["import-error"]
    p = ctx.Process(target=boom, args=(3,))
    p.start()
    p.join()
    print("exit codes", p.exitcode)
