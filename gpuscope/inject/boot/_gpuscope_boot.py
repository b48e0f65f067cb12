# The body of gpuscope's startup hook, run by sitecustomize.py beside it (read that first) from
# gpuscope's code cache: it is executed in sitecustomize's own namespace, so `__file__`,
# `_BOOT_NS`, `_cache_dir`, `_key` and `_cached_code` are the stub's. It loads gpuscope's injection
# package by file path under the name `_gpuscope_inject` (the interpreter may be another
# virtualenv without gpuscope), then runs the next `sitecustomize` on sys.path so that one is not
# disabled.
#
# Start-up cost (docs/INJECTION.md): no importlib.util/abc here; the package's compiled code is
# kept in gpuscope's own cache (one file per module and Python version, checked against the
# source's mtime and size), so PYTHONDONTWRITEBYTECODE does not make every process compile it.
# The modules every process needs are loaded straight from that cache (`_Finder.load`), in the
# order they import each other, not through the import system's search, and all from one file
# (`_Finder.load_start`): opening and reading a file per module cost ~0.1 ms each here.
import os as _os
import sys as _sys

_PKG = "_gpuscope_inject"
# What every process runs at start, each after the modules it imports (the hook loads more by
# role: hook.activate). A module missing here is imported as usual, only slower.
_START = ("__init__", "procself", "exitstatus", "eventlog", "importhook", "procname", "hook", "disguise", "forkwatch", "stacks")


class _Loader:
    """Execute one module of the package from gpuscope's code cache (compiling on a miss), or from
    the code it was given (the start file's)."""

    def __init__(self, path, cache, code=None):
        self.path = path
        self.cache = cache
        self.code = code

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if self.code is None:
            self.code = _cached_code(self.path, self.cache)
        exec(self.code, module.__dict__)


class _Finder:
    """Finds ``_gpuscope_inject`` and its modules (last on sys.meta_path; no other names)."""

    def __init__(self, pkg_dir):
        self.pkg_dir = pkg_dir
        self.cache = _os.path.join(_cache_dir(), _key(pkg_dir))
        self._pyc = "." + _sys.implementation.cache_tag + ".pyc"

    def find_spec(self, name, path=None, target=None):
        if name != _PKG and not name.startswith(_PKG + "."):
            return None
        stem = "__init__" if name == _PKG else name[len(_PKG) + 1:]
        if "." in stem or not _os.path.isfile(self._source(stem)):
            return None
        return self._spec(name, stem)

    def _source(self, stem):   # (joined by hand: os.path.join is ~2 us a call, two a module at start)
        return self.pkg_dir + _os.sep + stem + ".py"

    def _spec(self, name, stem, code=None):
        source = self._source(stem)
        cache = self.cache + _os.sep + stem + self._pyc
        spec = _sys.modules["_frozen_importlib"].ModuleSpec(
            name, _Loader(source, cache, code), origin=source, is_package=stem == "__init__")
        spec.has_location = True
        spec.cached = cache   # where its compiled code is kept: gpuscope's cache, not a __pycache__
        if stem == "__init__":
            spec.submodule_search_locations = []  # only this finder resolves the submodules
        return spec

    def load(self, stem, code=None):
        """``_gpuscope_inject.<stem>`` (``__init__``: the package) as an import makes it (this
        finder's spec, the module ``module_from_spec`` makes of it, the package's attribute),
        without the import system's search and locks: ~0.1 ms less a module, in every process. Only while the
        interpreter starts (one thread: no lock is taken). ``code``: the module's code, when the
        caller has it (the start file); else it comes from the module's own cache file. A missing
        source raises ImportError (a name outside the package, or another dotted one, is refused)."""
        name = _PKG if stem == "__init__" else _PKG + "." + stem
        module = _sys.modules.get(name)
        if module is not None:
            return module
        if "." in stem or (code is None and not _os.path.isfile(self._source(stem))):
            raise ImportError("no module named %r in %s" % (name, self.pkg_dir), name=name)
        spec = self._spec(name, stem, code)
        module = _new_module(spec)
        _sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            _sys.modules.pop(name, None)
            raise
        if stem != "__init__":
            setattr(_sys.modules[_PKG], stem, module)
        return module

    def load_start(self):
        """Every ``_START`` module, from one cache file (``start.<tag>.pyc``: one open and read
        instead of one per module, ~0.6 ms less a process here) when it was made from the sources
        as they are now (each source's mtime and size: one stat each); else each from its own
        cache file as above, and the start file written again for the next process."""
        stamp = tuple((st.st_mtime_ns, st.st_size) for st in [_os.stat(self._source(s)) for s in _START])
        path = _os.path.join(self.cache, "start.%s.pyc" % _sys.implementation.cache_tag)
        magic = _sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
        codes = None
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if data[:4] == magic:
                saved, codes = _marshal.loads(data[4:])
                if saved != stamp or not all(type(codes.get(s)) is _CODE for s in _START):
                    codes = None
        except (OSError, ValueError, EOFError, TypeError, AttributeError):
            codes = None
        made = {}
        for stem in _START:
            module = self.load(stem, None if codes is None else codes[stem])
            made[stem] = getattr(getattr(module.__spec__, "loader", None), "code", None)
        if codes is None and all(type(c) is _CODE for c in made.values()):
            _write_cache(path, magic + _marshal.dumps((stamp, made)))


_CODE = type(_Loader.exec_module.__code__)


def _new_module(spec):
    """The module ``module_from_spec(spec)`` makes of one of ``_Finder``'s specs (its loader
    creates none: a plain module with the spec's attributes), set here directly: the import
    system's general version took ~40 us a module here, ~0.3 ms of every process's start."""
    module = type(_sys)(spec.name)
    module.__loader__ = spec.loader
    module.__package__ = _PKG
    module.__spec__ = spec
    if spec.submodule_search_locations is not None:
        module.__path__ = spec.submodule_search_locations
    module.__file__ = spec.origin
    module.__cached__ = spec.cached
    return module


def _gpuscope_boot():
    here = _os.path.dirname(_os.path.abspath(__file__))
    if _os.environ.get("GPUSCOPE_RUN_DIR"):
        try:
            finder = _Finder(_os.path.dirname(here))
            _sys.meta_path.append(finder)
            finder.load_start()
            _sys.modules[_PKG + ".hook"].activate(_BOOT_NS, finder.load)
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
    spec = _sys.modules["_frozen_importlib_external"].PathFinder.find_spec(
        "sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != here])
    if spec is None or spec.origin is None or _os.path.dirname(_os.path.abspath(spec.origin)) == here:
        return
    module = _sys.modules["_frozen_importlib"].module_from_spec(spec)
    _sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)  # its errors surface exactly as Python would report them


_gpuscope_chain(_gpuscope_boot())
