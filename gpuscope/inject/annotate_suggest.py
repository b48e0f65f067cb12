"""Closest existing names for an ``--annotate`` pattern that matched nothing (run at exit only)."""

import difflib
import types


def _names_in(module):
    """``qualname`` of functions and ``Class.method`` (own and inherited) that ``module`` defines."""
    name = getattr(module, "__name__", "")
    for value in list(vars(module).values()):
        if isinstance(value, types.FunctionType) and value.__module__ == name:
            yield value.__qualname__
        elif isinstance(value, type) and value.__module__ == name:
            for attr in dir(value):
                try:
                    member = getattr(value, attr)
                except Exception:
                    continue
                func = getattr(member, "__func__", member)
                if isinstance(func, types.FunctionType) and not attr.startswith("__"):
                    yield "%s.%s" % (value.__qualname__, attr)


def suggestions(module_pat, qual_pat, seen_modules, modules, n=3):
    """``module:qualname`` strings close to the pattern, best first (at most ``n``)."""
    seen = sorted(m for m in seen_modules if m in modules)
    if seen:
        scored = []
        for mod_name in seen:
            names = set(_names_in(modules[mod_name]))
            for match in difflib.get_close_matches(qual_pat, names, n=n, cutoff=0.5):
                ratio = difflib.SequenceMatcher(None, qual_pat, match).ratio()
                scored.append((-ratio, "%s:%s" % (_shown(module_pat, mod_name), match)))
        return [text for _, text in sorted(set(scored))[:n]]
    loaded = [m for m, v in list(modules.items()) if v is not None and not m.startswith("_gpuscope")]
    return ["%s:%s" % (m, qual_pat) for m in difflib.get_close_matches(module_pat, loaded, n=n, cutoff=0.6)]


def _shown(module_pat, mod_name):
    return module_pat if mod_name in ("__main__", "__mp_main__") else mod_name
