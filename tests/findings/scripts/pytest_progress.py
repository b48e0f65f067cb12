"""A pytest file run under `gpuscope run` (tests/findings/test_cli_output.py): its first test forks
beside a thread (a live `fork-with-threads` finding), the others keep the progress line going."""

import os
import threading
import time

import pytest


def test_fork_with_a_thread():
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, name="busy-helper")
    helper.start()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    stop.set()
    helper.join()


@pytest.mark.parametrize("i", range(40))
def test_later(i):
    time.sleep(0.1)
