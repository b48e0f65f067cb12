# gpuscope startup hook. This folder is put first on PYTHONPATH for the processes of a gpuscope run.
#
# This file is a stub. The hook itself, _gpuscope_boot.py beside it, runs from gpuscope's own code
# cache (compiled once per Python version, checked against the source's mtime and size) in this
# module's namespace. Where Python does not write byte code (PYTHONDONTWRITEBYTECODE) it would
# compile this file at every start, and a process's first compile costs 2-5 ms whatever the size:
# so the stub writes its own .pyc into __pycache__ once (as Python would have), and later starts
# load that. A folder gpuscope may not write to just leaves things as Python does them.
import marshal as _marshal
import os as _os
import sys as _sys
import time as _time

_BOOT_NS = _time.perf_counter_ns()   # gpuscope's own share of the start is measured from here


def _cache_dir():
    base = _os.environ.get("GPUSCOPE_INJECT_CACHE")
    if base:
        return base
    root = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
    return _os.path.join(root, "gpuscope", "inject-pyc")


def _key(text):
    """A short stable hash (FNV-1a) of a folder: two checkouts never share files."""
    h = 0xcbf29ce484222325
    for ch in text.encode("utf-8", "surrogateescape"):
        h = ((h ^ ch) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def _cached_code(path, cache):
    """The code of source file `path`, from the cache file `cache` (written on a miss)."""
    st = _os.stat(path)
    header = (_sys.modules["_frozen_importlib_external"].MAGIC_NUMBER + st.st_mtime_ns.to_bytes(8, "little")
              + st.st_size.to_bytes(8, "little"))
    try:
        with open(cache, "rb") as fh:
            data = fh.read()
        if data[:20] == header:
            return _marshal.loads(data[20:])
    except (OSError, ValueError, EOFError, TypeError):
        pass
    return _compile_into(path, cache, header)


def _compile_into(path, cache, header):
    """Compile source file `path` and write `header` + its code to `cache` (to a `.tmp`, renamed:
    processes starting at once each write a whole file); a folder that refuses is left alone."""
    with open(path, "rb") as fh:
        code = compile(fh.read(), path, "exec", dont_inherit=True)
    _write_cache(cache, header + _marshal.dumps(code))
    return code


def _write_cache(cache, data):
    """Write `data` to the cache file `cache` (to a `.tmp`, renamed: processes starting at once
    each write a whole file); a folder that refuses is left alone (a read-only home: compile each
    time, as Python would)."""
    try:
        _os.makedirs(_os.path.dirname(cache), exist_ok=True)
        tmp = "%s.%d.tmp" % (cache, _os.getpid())
        with open(tmp, "wb") as fh:
            fh.write(data)
        _os.replace(tmp, cache)
    except OSError:
        pass


def _keep_compiled():
    """Write this file's .pyc (timestamp-checked, the format Python reads) where Python did not."""
    cached = globals().get("__cached__")
    if not _sys.dont_write_bytecode or not cached:
        return
    try:
        st = _os.stat(__file__)
        header = (_sys.modules["_frozen_importlib_external"].MAGIC_NUMBER + b"\0\0\0\0"
                  + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        try:
            with open(cached, "rb") as fh:
                if fh.read(16) == header:
                    return
        except OSError:
            pass
        _compile_into(__file__, cached, header)
    except Exception:
        pass


def _gpuscope_start():
    here = _os.path.dirname(_os.path.abspath(__file__))
    try:
        body = _os.path.join(here, "_gpuscope_boot.py")
        code = _cached_code(body, _os.path.join(_cache_dir(), _key(here), "boot.%s.pyc" % _sys.implementation.cache_tag))
    except Exception as exc:  # a damaged install: never break the user's interpreter start
        try:
            with open(_os.path.join(_os.environ["GPUSCOPE_RUN_DIR"], "inject-errors.log"), "a") as fh:
                fh.write("pid %d: boot failed: %r\n" % (_os.getpid(), exc))
        except Exception:
            pass
        while here in _sys.path:
            _sys.path.remove(here)
        return
    exec(code, globals())   # the body's own errors are caught there; a user's sitecustomize's are theirs


_gpuscope_start()
_keep_compiled()
