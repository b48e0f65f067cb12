# gpuscope startup hook. This folder is put first on PYTHONPATH for the processes of a gpuscope run.
# It loads gpuscope's injection package by file path (the interpreter may be another virtualenv
# without gpuscope), then runs the next `sitecustomize` on sys.path so that one is not disabled.
import os as _os
import sys as _sys


def _gpuscope_boot():
    here = _os.path.dirname(_os.path.abspath(__file__))
    if _os.environ.get("GPUSCOPE_RUN_DIR"):
        try:
            import importlib.util

            pkg_dir = _os.path.dirname(here)
            spec = importlib.util.spec_from_file_location(
                "_gpuscope_inject", _os.path.join(pkg_dir, "__init__.py"),
                submodule_search_locations=[pkg_dir])
            module = importlib.util.module_from_spec(spec)
            _sys.modules["_gpuscope_inject"] = module
            spec.loader.exec_module(module)
            from _gpuscope_inject import hook

            hook.activate()
        except Exception as exc:  # never break the user's interpreter start
            try:
                with open(_os.path.join(_os.environ["GPUSCOPE_RUN_DIR"], "inject-errors.log"), "a") as fh:
                    fh.write("pid %d: boot failed: %r\n" % (_os.getpid(), exc))
            except Exception:
                pass
    # Keep sys.path as the program would see it without gpuscope.
    try:
        while here in _sys.path:
            _sys.path.remove(here)
    except Exception:
        pass
    return here


def _gpuscope_chain(here):
    """Execute the next sitecustomize on sys.path (a user's or the distribution's)."""
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec(
        "sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != here])
    if spec is None or spec.origin is None or _os.path.dirname(_os.path.abspath(spec.origin)) == here:
        return
    module = importlib.util.module_from_spec(spec)
    _sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)  # its errors surface exactly as Python would report them


_gpuscope_chain(_gpuscope_boot())
