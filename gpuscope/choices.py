"""Named text values: what ``class X(str, enum.Enum)`` gives gpuscope's run path, without ``enum``.

``import enum`` costs 3-5 ms on a 2-core runner, and ``gpuscope run`` needs three such sets (a
run's status, why a process belongs to a run, a finding's severity) and nothing else of it (issue
14.4). A subclass of :class:`Choices` lists its members as ``NAME = "text"`` (upper-case names).
Each member is a ``str``: equal to its text, hashed as it, stored in SQLite and written as JSON as
it, and ``str()`` and f-strings give the text. As a member of a ``str`` enum, it has ``.name`` and ``.value``;
``Cls("text")`` gives the member (``ValueError`` for any other text); ``list(Cls)`` the members in
order; members compare with ``is`` and pickle as themselves. Not here: aliases, ``auto()``,
``Cls["NAME"]``, ``Cls.__members__``. tests/test_choices.py holds it to ``enum``'s behaviour.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator


class _Members(type):
    """Makes the upper-case text attributes of a :class:`Choices` subclass its members."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> _Members:
        cls = super().__new__(mcs, name, bases, namespace)
        by_value: dict[str, tuple[str, Any]] = {}
        for key, value in namespace.items():
            if key.isupper() and isinstance(value, str) and not key.startswith("_"):
                if value in by_value:
                    raise ValueError(f"{name}.{key}: the text {value!r} is {name}.{by_value[value][0]}'s already")
                member = str.__new__(cls, value)    # type: ignore[call-overload]
                setattr(cls, key, member)
                by_value[value] = (key, member)
        cls._by_value = by_value
        return cls

    def __iter__(cls) -> Iterator[Any]:
        return iter([member for _, member in cls._by_value.values()])

    def __len__(cls) -> int:
        return len(cls._by_value)


class Choices(str, metaclass=_Members):
    """Base of a set of named text values (see the module's docstring)."""

    __slots__ = ()
    _by_value: dict[str, tuple[str, Choices]]

    def __new__(cls, value: str) -> Choices:
        try:
            return cls._by_value[value][1]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}") from None

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def name(self) -> str:
        return type(self)._by_value[str.__str__(self)][0]

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return format(str.__str__(self), spec)

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__}.{self.name}: {str.__str__(self)!r}>"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return type(self), (str.__str__(self),)
