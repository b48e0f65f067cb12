"""Code that runs inside the user's processes.

Rules (checked before every submission):

* standard library only at import time; ``nvtx`` and ``torch`` are touched only when the user's
  program has imported them itself;
* inert unless ``GPUSCOPE_RUN_DIR`` is set;
* never raises into user code: every entry point catches, logs to the run folder and carries on;
* never changes the program's stdout, exit code, ``sys.argv`` or ``__main__`` semantics.

The package is loaded by ``boot/sitecustomize.py`` under the private name ``_gpuscope_inject``
(the user's interpreter may not have gpuscope installed), so modules here import each other
relatively.
"""
