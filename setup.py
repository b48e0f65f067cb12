"""gpuscope's two compiled modules (the rest of the build is in pyproject.toml):

- gpuscope/nsys/_pagescan.c decodes an nsys export's NVTX table from the SQLite file's pages;
- gpuscope/trace/_nesting.c gives ranges their nesting depth.

Both are optional: where no C compiler is found the install goes on without them and gpuscope
does the same work in numpy (gpuscope/nsys/pages.py, gpuscope/trace/timeline.nesting_depth),
slower, with the same results (tests/nsys_read/test_pages.py, tests/nsys_read/test_units.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(f"gpuscope.{name.replace('/', '.')}", [f"gpuscope/{name}.c"],
                             extra_compile_args=["-O2"], optional=True)
                   for name in ("nsys/_pagescan", "trace/_nesting")])
