"""A ProcessPoolExecutor task kills its own worker: the executor breaks ("terminated abruptly")."""
import os
import signal
from concurrent.futures import ProcessPoolExecutor


def die(_):
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    with ProcessPoolExecutor(1) as ex:
        ex.submit(die, 0).result()
