"""gpuscope: a profiling assistant for Python programs that use many processes and GPUs.

The package root imports nothing heavy: the CLI, the core and the app load lazily.
"""

__version__ = "0.1.0"
APP_ID = "io.github.gpuscope.GpuScope"
