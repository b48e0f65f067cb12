"""gpuscope.record makes what @dataclass makes: each class shape is built both ways from the same
body and the two are compared (the dataclass is the oracle), and the run path never imports
dataclasses."""

from __future__ import annotations

import copy
import os
import dataclasses
import math
import pickle

import pytest

from gpuscope import record as rec
from tests.fresh_python import fresh_json


def both(body: dict, **options):
    """The same class made by @dataclass and by @record (``body``: annotations and defaults; a
    value ``("factory", f)`` is a default factory, ``("hidden", v)`` a field with repr and compare off)."""
    made = []
    for deco, field in ((dataclasses.dataclass, dataclasses.field), (rec.record, rec.field)):
        ns = {"__annotations__": {}, "__module__": __name__, "__qualname__": "Shape"}
        for name, value in body.items():
            ns["__annotations__"][name] = "int"
            if isinstance(value, tuple) and value[0] == "factory":
                ns[name] = field(default_factory=value[1])
            elif isinstance(value, tuple) and value[0] == "hidden":
                ns[name] = field(default=value[1], repr=False, compare=False)
            elif value is not rec._MISSING:
                ns[name] = value
        made.append(deco(**options)(type("Shape", (), ns)))
    return made


M = rec._MISSING
SHAPES = [
    {"a": M, "b": M},
    {"a": M, "b": 2, "c": ("factory", list)},
    {"a": 1, "b": "x"},
    {},
    {"a": M, "b": ("hidden", 7)},
]
OPTIONS = [{}, {"frozen": True}, {"frozen": True, "slots": True}, {"slots": True}]


def error(make):
    with pytest.raises(TypeError) as info:
        make()
    return str(info.value)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
@pytest.mark.parametrize("body", SHAPES, ids=lambda b: ",".join(b) or "empty")
def test_record_behaves_as_the_dataclass(body, options):
    dc, rc = both(body, **options)
    required = [n for n, v in body.items() if v is M]
    args = list(range(10, 10 + len(required)))
    d, r = dc(*args), rc(*args)
    assert repr(d) == repr(r)
    assert [f.name for f in dataclasses.fields(dc)] == [f.name for f in rec.fields(rc)] == list(body)
    assert rc.__match_args__ == dc.__match_args__
    assert (r == rc(*args)) and not (r != rc(*args)) and r != d and r.__eq__(d) is NotImplemented
    if body:
        first = next(iter(body))
        other = rc(**{**{n: getattr(r, n) for n in body}, first: 99})
        assert r != other
        assert rec.replace(r, **{first: 99}) == other
        assert dataclasses.replace(d, **{first: 99}).__dict__ if not options.get("slots") else True
    assert rec.asdict(r) == dataclasses.asdict(d)
    # hashing: frozen records hash their compared fields; others are unhashable, as dataclasses
    if options.get("frozen"):
        try:
            expected = hash(d)
        except TypeError:   # a list field: unhashable both ways
            with pytest.raises(TypeError):
                hash(r)
        else:
            assert hash(r) == expected == hash(rc(*args))
        for name in body:
            with pytest.raises(AttributeError) as info:
                setattr(r, name, 1)
            assert isinstance(info.value, rec.FrozenError)
            with pytest.raises(rec.FrozenError):
                delattr(r, name)
    else:
        with pytest.raises(TypeError):
            hash(r)
        for name in body:
            setattr(r, name, 5)
            setattr(d, name, 5)
        assert repr(r) == repr(d)
    assert hasattr(r, "__dict__") == hasattr(d, "__dict__")
    # copies keep every field, frozen and slotted too (pickles: test_records_pickle)
    for back in (copy.copy(r), copy.deepcopy(r)):
        assert back == r and type(back) is rc
    # the same TypeError words as the dataclass's __init__ (Python's own for a function)
    assert error(lambda: rc(*args, 1, 2, 3)) == error(lambda: dc(*args, 1, 2, 3))
    assert error(lambda: rc(*args, nope=1)) == error(lambda: dc(*args, nope=1))
    if required:
        assert error(lambda: rc()) == error(lambda: dc())
        assert error(lambda: rc(*args, **{required[0]: 1})) == error(lambda: dc(*args, **{required[0]: 1}))


@rec.record(frozen=True, slots=True)
class FrozenSlots:
    a: int
    b: list = rec.field(default_factory=list)


@rec.record(frozen=True)
class Frozen:
    a: int
    b: str = "x"


@rec.record
class Plain:
    a: int
    b: dict = rec.field(default_factory=dict)


@pytest.mark.parametrize("value", [FrozenSlots(1, [2]), Frozen(3), Plain(4, {"k": 5})], ids=lambda v: type(v).__name__)
def test_records_pickle(value):
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(value, protocol))
        assert back == value and type(back) is type(value)


def test_default_factory_gives_each_record_its_own_value():
    _dc, rc = both({"a": ("factory", list)})
    one, two = rc(), rc()
    one.a.append(1)
    assert two.a == [] and one.a == [1]
    assert "a" not in rc.__dict__   # no class attribute left behind, as a dataclass
    _dc, rc = both({"a": 3})
    assert rc.a == 3


def test_missing_words_for_three_fields_match_python():
    dc, rc = both({"a": M, "b": M, "c": M})
    assert error(lambda: rc()) == error(lambda: dc()) == "Shape.__init__() missing 3 required positional arguments: 'a', 'b', and 'c'"


def test_equal_when_a_field_is_the_same_nan_object():
    _dc, rc = both({"a": M})
    nan = math.nan
    assert rc(nan) == rc(nan)


def test_mutable_default_and_order_errors_match_dataclasses():
    with pytest.raises(ValueError):
        both({"a": []})
    with pytest.raises(TypeError):
        both({"a": 1, "b": M})


def test_methods_the_class_defines_are_kept():
    @rec.record(frozen=True)
    class Kept:
        a: int

        def __repr__(self) -> str:
            return "mine"

    assert repr(Kept(1)) == "mine" and Kept(1) == Kept(1) and hash(Kept(1)) == hash(Kept(1))


def test_nested_records_become_dicts_and_lists_are_copied():
    @rec.record
    class Inner:
        x: int

    @rec.record
    class Outer:
        inner: Inner
        items: list

    items = [Inner(1), {"k": Inner(2)}]
    out = rec.asdict(Outer(Inner(0), items))
    assert out == {"inner": {"x": 0}, "items": [{"x": 1}, {"k": {"x": 2}}]}
    assert out["items"] is not items
    with pytest.raises(TypeError):
        rec.asdict(Outer)
    with pytest.raises(TypeError):
        rec.fields(object())


# What a plain `gpuscope run` does without (issue 14.4; docs/RUN-ENGINE.md): each of these costs 1-20 ms
# on a 2-core runner, or pulls in one that does.
NOT_ON_THE_RUN_PATH = ("dataclasses", "inspect", "ast", "dis", "signal", "pathlib", "re", "enum", "json", "typing",
                       "datetime", "sqlite3", "urllib.parse", "ipaddress", "fnmatch", "contextlib", "subprocess",
                       "argparse", "importlib.util", "platform", "numpy", "psutil", "threading", "functools",
                       "collections", "operator", "types")


def test_gpuscope_run_path_imports_none_of_the_costly_modules(tmp_path):
    """A whole plain `gpuscope run` (its program, recorders, telemetry, store, findings and summary)
    loads none of NOT_ON_THE_RUN_PATH, also when the program prints on both streams, and when its spawn
    pool's workers are ended by a signal (Pool's close terminates them: their rows name SIGTERM). The
    data folder's first run also asks `platform`
    (which imports subprocess, and with it signal) for the facts it keeps: the second is measured.
    Run without site (`-S`): an editable install's finder loads re and pathlib into every interpreter."""
    script = tmp_path / "hello.py"
    script.write_text("import multiprocessing as mp, sys\n"
                      "if __name__ == '__main__':\n"
                      "    with mp.get_context('spawn').Pool(2) as pool:\n"
                      "        print(sum(pool.map(abs, range(-8, 8))))\n"
                      "    print('warning: x', file=sys.stderr)\n")
    probe = ("import sys\n"
             "from gpuscope import cli\n"
             "code = cli._main(['run', '--quiet', sys.argv[1]], [])\n"
             "names = " + repr(NOT_ON_THE_RUN_PATH) + "\n"
             "print('[%d, [%s]]' % (code, ', '.join('\"%s\"' % m for m in names if m in sys.modules)))\n")
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home")}
    first = fresh_json(probe, str(script), env=env, bare=True)
    assert first[0] == 0 and not set(first[1]) & {"dataclasses", "inspect", "ast", "dis", "pathlib", "json"}, first
    assert fresh_json(probe, str(script), env=env, bare=True) == [0, []]


def test_a_record_subclass_adds_its_fields_after_the_base_ones_as_a_dataclass():
    made = []
    for deco in (rec.record(frozen=True), dataclasses.dataclass(frozen=True)):
        base = deco(type("Base", (), {"__annotations__": {"a": "int", "b": "int"}, "b": 2, "__module__": __name__}))
        child = deco(type("Child", (base,), {"__annotations__": {"c": "int"}, "c": 3, "__module__": __name__}))
        made.append((base, child))
    (base, child), (_dbase, dchild) = made
    assert [f.name for f in rec.fields(child)] == [f.name for f in dataclasses.fields(dchild)] == ["a", "b", "c"]
    assert repr(child(1)) == repr(dchild(1)) == "Child(a=1, b=2, c=3)"
    assert child(1, 5, 6) == child(a=1, b=5, c=6) and child(1) != base(1)


def test_class_variables_are_not_fields():
    @rec.record
    class Counted:
        total: ClassVar[int] = 0  # noqa: F821 - an annotation, never evaluated
        a: int = 1

    assert [f.name for f in rec.fields(Counted)] == ["a"] and Counted.total == 0
    with pytest.raises(TypeError):
        Counted(1, 2)


def test_init_false_fields_and_post_init_as_a_dataclass():
    """``field(init=False)`` is no parameter of ``__init__`` and gets its default; ``__post_init__``
    runs last (and may set fields of a frozen record through ``object.__setattr__``); ``replace``
    refuses an init=False field; ``__match_args__`` leaves it out."""
    made = []
    for deco, fld in ((rec.record(frozen=True), rec.field), (dataclasses.dataclass(frozen=True), dataclasses.field)):
        def post(self):
            object.__setattr__(self, "size", len(self.items))
        cls = deco(type("Bag", (), {
            "__annotations__": {"items": "tuple", "kind": "str", "size": "int", "tags": "list"},
            "kind": fld(default="bag", init=False), "size": fld(default=0, init=False),
            "tags": fld(default_factory=list, init=False), "__post_init__": post, "__module__": __name__}))
        made.append(cls)
    ours, theirs = made
    for cls in made:
        bag = cls((1, 2, 3))
        assert (bag.items, bag.kind, bag.size, bag.tags) == ((1, 2, 3), "bag", 3, [])
        assert cls.__match_args__ == ("items",) and cls.kind == "bag"
        with pytest.raises(TypeError):
            cls((1,), "other")
        with pytest.raises(TypeError):
            cls(items=(1,), kind="other")
    assert repr(ours((1,))) == repr(theirs((1,))) == "Bag(items=(1,), kind='bag', size=1, tags=[])"
    assert ours((1,)) == ours((1,)) != ours((2,))
    assert rec.replace(ours((1,)), items=(1, 2)).size == dataclasses.replace(theirs((1,)), items=(1, 2)).size == 2
    for replace, obj in ((rec.replace, ours((1,))), (dataclasses.replace, theirs((1,)))):
        with pytest.raises(ValueError, match="init=False"):
            replace(obj, kind="other")
    assert rec.asdict(ours((1,))) == dataclasses.asdict(theirs((1,)))


def test_cached_is_functools_cached_property_on_a_frozen_record():
    import functools

    calls: list[str] = []
    made = []
    for deco in (rec.cached, functools.cached_property):
        @rec.record(frozen=True)
        class Proc:
            pid: int

            @deco
            def cmd(self) -> str:
                """The command."""
                calls.append(deco.__name__)
                return f"cmd {self.pid}"

        p = Proc(7)
        made.append((p.cmd, p.cmd, Proc.cmd.__doc__, p == Proc(7), "cmd" in p.__dict__))

        class Plain:
            @deco
            def value(self) -> int:
                calls.append("plain")
                return 1

        q = Plain()
        assert q.value == q.value == 1
        del q.value                     # dropped: the next read computes it again
        assert q.value == 1
    assert made[0] == made[1] == ("cmd 7", "cmd 7", "The command.", True, True)
    assert calls == ["cached", "plain", "plain", "cached_property", "plain", "plain"]
