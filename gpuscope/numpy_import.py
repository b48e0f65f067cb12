"""Load numpy in gpuscope's own processes without OpenBLAS's thread pool.

numpy's OpenBLAS starts a thread per core as it loads, and they spin for a while: on the 2-core
development machine `python -c "import numpy"` took 0.17-0.27 s of CPU, against 0.10 s with
``OPENBLAS_NUM_THREADS=1`` (docs/NSYS-REPORTS.md, "Benchmark"). gpuscope does no linear algebra,
so the commands that read data (report, gui, compare, findings) load numpy with one BLAS thread
first, then put the environment back exactly as it was: every program gpuscope starts later gets
the user's environment unchanged. A value the user set is left alone, and so is a numpy already
loaded. Only call this while gpuscope starts no process on another thread.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "OPENBLAS_NUM_THREADS"


def preload() -> None:
    """Import numpy with one OpenBLAS thread (no-op if numpy is loaded or the user chose)."""
    if "numpy" in sys.modules or VARIABLE in os.environ:
        return
    os.environ[VARIABLE] = "1"
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    finally:
        os.environ.pop(VARIABLE, None)
