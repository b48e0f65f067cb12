"""Records: classes of named fields, as ``@dataclass`` makes them, made without ``dataclasses``.

``gpuscope run`` is a short program's whole wrapper: every millisecond before the program starts
and after it ends is a millisecond of the fixed cost (issue 14.4). ``import dataclasses`` pulls in
``inspect`` (``ast``, ``dis``, ``tokenize``): ~20 ms on a 2-core runner; and each ``@dataclass``
compiles its generated methods with ``exec``: 1.3-2 ms a class, and the run path has two dozen.
``@record`` makes the same methods as closures over the field list, with no compile at all:

- ``__init__`` with the fields as positional-or-keyword parameters in order, defaults and
  ``field(default_factory=...)``, and the same ``TypeError`` words as a function's; a field with
  ``field(init=False)`` is not a parameter and gets its default; ``__post_init__`` is called last;
- ``__repr__`` (``Name(a=1, b='x')``, fields with ``repr=False`` left out), ``__eq__`` (same class,
  fields with ``compare=False`` left out), ``__match_args__``;
- ``frozen=True``: assigning or deleting a field raises :class:`FrozenError` (an
  ``AttributeError``), and ``__hash__`` hashes the compared fields; otherwise ``__hash__`` is None
  (unhashable), as for a dataclass with ``eq=True``;
- ``slots=True``: the class is made again with ``__slots__`` (no ``__dict__``), and pickles and
  copies by its fields.

A method the class defines itself is kept. :func:`fields`, :func:`replace` and :func:`asdict` are
the module functions of the same names for records; :class:`cached` is
``functools.cached_property`` (``functools`` pulls in ``collections`` and compiles a named tuple:
issue 14.4). Per instance, ``__init__`` costs what a dataclass's does (measured: 2.1 against
2.2 us for ten positional fields).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar

    T = TypeVar("T")

_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "MISSING"})()


class FrozenError(AttributeError):
    """A field of a frozen record was assigned or deleted."""


class Field:
    """One field of a record: its name, default (or default factory), whether ``__init__`` takes
    it, and whether ``__repr__`` and ``__eq__`` see it."""

    __slots__ = ("name", "default", "default_factory", "repr", "compare", "init")

    def __init__(self, default: Any = _MISSING, default_factory: Any = _MISSING, repr: bool = True,
                 compare: bool = True, init: bool = True) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare
        self.init = init

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | Any = _MISSING, repr: bool = True,
          compare: bool = True, init: bool = True) -> Any:
    """A field's options, as ``dataclasses.field``: ``default`` or ``default_factory`` (called for
    each new record), ``repr=False``, ``compare=False`` and ``init=False`` (not a parameter of
    ``__init__``, which sets its default)."""
    return Field(default, default_factory, repr, compare, init)


def record(cls: type[T] | None = None, /, *, frozen: bool = False, slots: bool = False) -> Any:
    """Make ``cls`` a record (as ``@dataclass``, ``@dataclass(frozen=True, slots=True)``)."""
    def wrap(c: type[T]) -> type[T]:
        return _make(c, frozen, slots)
    return wrap if cls is None else wrap(cls)


def _is_classvar(annotation: Any) -> bool:
    text = annotation.strip("'\"") if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _own_fields(cls: type) -> list[Field]:
    out = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        if isinstance(f.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        out.append(f)
    return out


def _make(cls: type[T], frozen: bool, slots: bool) -> type[T]:
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, "__record_fields__", ()):
            inherited[f.name] = f
    for f in _own_fields(cls):
        inherited[f.name] = f
    all_fields = tuple(inherited.values())
    seen_default = False
    for f in all_fields:
        if not f.init:
            continue
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has_default
    names = tuple(f.name for f in all_fields)
    if slots:
        cls = _with_slots(cls, names)
    else:
        for f in all_fields:   # the class attribute is the default, as a dataclass leaves it
            if f.default is _MISSING and isinstance(cls.__dict__.get(f.name), Field):
                delattr(cls, f.name)
            elif isinstance(cls.__dict__.get(f.name), Field):
                setattr(cls, f.name, f.default)
    methods: dict[str, Any] = {
        "__init__": _init(cls, all_fields, frozen),
        "__repr__": _repr(tuple(f.name for f in all_fields if f.repr)),
        "__eq__": _eq(tuple(f.name for f in all_fields if f.compare)),
        "__match_args__": tuple(f.name for f in all_fields if f.init),
    }
    if frozen:
        methods["__setattr__"], methods["__delattr__"] = _frozen_setattr, _frozen_delattr
    for name, method in methods.items():
        if name not in cls.__dict__:
            if callable(method) and name not in ("__setattr__", "__delattr__"):   # those two are shared
                method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
    if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
        cls.__hash__ = _hash(tuple(f.name for f in all_fields if f.compare)) if frozen else None  # type: ignore[assignment]
    cls.__record_fields__ = all_fields  # type: ignore[attr-defined]
    return cls


def _with_slots(cls: type[T], names: tuple[str, ...]) -> type[T]:
    """``cls`` made again with ``__slots__`` for its fields (a class cannot gain slots afterwards)."""
    namespace = {k: v for k, v in cls.__dict__.items() if k not in names and k not in ("__dict__", "__weakref__")}
    namespace["__slots__"] = tuple(n for n in names if not any(n in getattr(b, "__slots__", ()) for b in cls.__mro__[1:]))
    if "__reduce__" not in namespace:
        namespace["__reduce__"] = _reduce(names)
    new = type(cls)(cls.__name__, cls.__bases__, namespace)
    new.__qualname__ = cls.__qualname__
    return new


def _init(cls: type, all_fields: tuple[Field, ...], frozen: bool) -> Callable[..., None]:
    taken = tuple(f for f in all_fields if f.init)
    names = tuple(f.name for f in taken)
    known = frozenset(names)
    defaults = {f.name: f.default for f in taken if f.default is not _MISSING}
    factories = {f.name: f.default_factory for f in taken if f.default_factory is not _MISSING}
    fixed = tuple((f.name, f.default, f.default_factory) for f in all_fields
                  if not f.init and (f.default is not _MISSING or f.default_factory is not _MISSING))
    post_init = getattr(cls, "__post_init__", None)
    count = len(names)
    put = object.__setattr__ if frozen else setattr
    title = f"{cls.__qualname__}.__init__()"
    required = count - len(defaults) - len(factories)
    takes = f"{count + 1}" if required == count else f"from {required + 1} to {count + 1}"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > count:
            raise TypeError(f"{title} takes {takes} positional argument{'s' if count else ''} "
                            f"but {len(args) + 1} were given")
        for name, value in zip(names, args):
            put(self, name, value)
        missing = []
        for name in names[len(args):]:
            if name in kwargs:
                put(self, name, kwargs.pop(name))
            elif name in defaults:
                put(self, name, defaults[name])
            elif name in factories:
                put(self, name, factories[name]())
            else:
                missing.append(name)
        if kwargs:
            name = next(iter(kwargs))
            if name in known:
                raise TypeError(f"{title} got multiple values for argument {name!r}")
            raise TypeError(f"{title} got an unexpected keyword argument {name!r}")
        if missing:
            quoted = [repr(n) for n in missing]
            words = " and ".join(quoted) if len(quoted) <= 2 else ", ".join(quoted[:-1]) + ", and " + quoted[-1]
            raise TypeError(f"{title} missing {len(missing)} required positional argument"
                            f"{'s' if len(missing) > 1 else ''}: {words}")
        for name, default, factory in fixed:   # init=False fields, as a dataclass sets them
            put(self, name, factory() if default is _MISSING else default)
        if post_init is not None:
            self.__post_init__()
    return __init__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({body})"
    return __repr__


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        # as tuples, as a dataclass compares: a field that is the same object is equal (a NaN too)
        return tuple([getattr(self, n) for n in names]) == tuple([getattr(other, n) for n in names])
    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))
    return __hash__


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenError(f"cannot delete field {name!r}")


def _reduce(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    def __reduce__(self: Any) -> tuple[Any, ...]:
        return _rebuild, (type(self), tuple(getattr(self, n) for n in names))
    return __reduce__


def _rebuild(cls: type, values: tuple[Any, ...]) -> Any:
    """A slotted record from its field values (what its ``__reduce__`` pickles), without ``__init__``."""
    obj = object.__new__(cls)
    for f, value in zip(cls.__record_fields__, values):  # type: ignore[attr-defined]
        object.__setattr__(obj, f.name, value)
    return obj


class cached:
    """``functools.cached_property``: the method's value, computed on the first read and kept in
    the instance's ``__dict__`` (so a frozen record can have one too); deleting the attribute makes
    the next read compute it again."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value


def is_record(obj: Any) -> bool:
    """``obj`` is a record class or instance."""
    return hasattr(obj if isinstance(obj, type) else type(obj), "__record_fields__")


def fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a record (class or instance), in order."""
    try:
        return (obj if isinstance(obj, type) else type(obj)).__record_fields__  # type: ignore[no-any-return]
    except AttributeError:
        raise TypeError("fields() needs a record or a record class") from None


def replace(obj: T, /, **changes: Any) -> T:
    """A new record like ``obj`` with ``changes`` (a new ``__init__`` call, as ``dataclasses.replace``)."""
    values = {}
    for f in fields(obj):
        if f.init:
            values[f.name] = getattr(obj, f.name)
        elif f.name in changes:
            raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
    values.update(changes)
    return type(obj)(**values)


def asdict(obj: Any) -> dict[str, Any]:
    """A record as a dict, nested records, lists, tuples and dicts converted (as ``dataclasses.asdict``)."""
    if not is_record(obj) or isinstance(obj, type):
        raise TypeError("asdict() needs a record instance")
    return _plain(obj)   # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    if is_record(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[_plain(v) for v in value])
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    if value is None or isinstance(value, (str, int, float, bool, bytes)):
        return value
    import copy

    return copy.deepcopy(value)
