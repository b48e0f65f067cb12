"""A wrapper that looks like what it wraps: its name, qualified name, docstring, module and
``__wrapped__`` (what tracebacks, ``inspect`` and pickling by reference read). Standard library
only; nothing imported."""


def disguise(wrapper, original, **marks):
    """Copy ``original``'s identity onto ``wrapper`` (attributes it lacks are skipped), set
    ``__wrapped__`` and each of ``marks`` (gpuscope's "already wrapped" flags); returns ``wrapper``."""
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = original
    for name, value in marks.items():
        setattr(wrapper, name, value)
    return wrapper
