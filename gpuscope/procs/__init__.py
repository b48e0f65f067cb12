"""The process service: the one place that reads ``/proc``, decides run membership, signals
processes with an identity check, and knows who uses a ``/dev/shm`` file (docs/PROCS.md).

Import the module you need (``gpuscope.procs.key.ProcKey``, ``gpuscope.procs.read``, ...): this
package imports nothing itself, because ``gpuscope run`` lists the host's processes
(``procs.existing``) before the program starts, where every module counts.
"""
