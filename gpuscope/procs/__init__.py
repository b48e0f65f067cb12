"""The process service: the one place that reads ``/proc``, decides run membership, signals
processes with an identity check, and knows who uses a ``/dev/shm`` file."""

from gpuscope.procs.key import ProcKey

__all__ = ["ProcKey"]
