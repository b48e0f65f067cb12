"""gpuscope.jsontext writes and reads JSON exactly as the json package does, without importing it."""

from __future__ import annotations

import enum
import json
import math
import random

import pytest

from gpuscope import jsontext
from tests.fresh_python import fresh_json


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


TEXTS = ["", "plain", "quote \" backslash \\ slash /", "tab\tnew\nline\r", "\x00\x01\x1f\x7f",
         "é ü 中文 😀", "\ud800 lone surrogate", "\u2028\u2029"]
NUMBERS = [0, -1, 2**70, -(2**65), 1.5, -0.0, 1e300, 5e-324, 0.1 + 0.2, math.nan, math.inf, -math.inf,
           True, False, Level.HIGH]


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 4 else 4)
    if kind == 0:
        return rng.choice(TEXTS + [Colour.RED])
    if kind == 1:
        return rng.choice(NUMBERS)
    if kind == 2:
        return None
    if kind == 3:
        return rng.choice(TEXTS) + str(rng.random())
    if kind in (4, 5):
        items = [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return tuple(items) if kind == 5 else items
    keys = TEXTS + [1, -7, 2.5, math.inf, True, False, None, Colour.RED, Level.HIGH]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randrange(5))}


VALUES = [_value(random.Random(seed)) for seed in range(400)] + [
    {}, [], {"a": {}, "b": []}, {"run_id": "x", "processes": [{"pid": 1, "info": {}}], "nsys": None}]


@pytest.mark.parametrize("indent", [None, 0, 1, 2, 4])
def test_dumps_writes_what_json_dumps_writes(indent):
    for value in VALUES:
        assert jsontext.dumps(value, indent=indent) == json.dumps(value, indent=indent), value


def test_loads_reads_what_json_loads_reads():
    for value in VALUES:
        for text in (json.dumps(value), json.dumps(value, indent=2), " \n" + json.dumps(value) + "\t\r\n"):
            # repr: NaN is not equal to itself, and the types must match too (1 is not 1.0)
            assert repr(jsontext.loads(text)) == repr(json.loads(text))
            assert repr(jsontext.loads(text.encode())) == repr(json.loads(text.encode()))
            assert repr(jsontext.loads(bytearray(text.encode()))) == repr(json.loads(text.encode()))


@pytest.mark.parametrize("text", ["", " ", "{", "[1,]", "1 2", "{'a': 1}", '"\x01"', "nan", "\ufeff[1]", "[1] x",
                                  b"\xff[1]", '{"a" 1}'])
def test_what_json_rejects_fails_with_jsons_own_error(text):
    with pytest.raises(ValueError) as ours:    # JSONDecodeError; UnicodeDecodeError for the b"\xff"
        jsontext.loads(text)
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


@pytest.mark.parametrize("text", [b"\xef\xbb\xbf[1, 2]", '["\\ud800 \udfff"]'.encode("utf-8", "surrogatepass"), "[1]".encode("utf-16"), '{"a": [1]}'.encode("utf-16-le"),
                                  "[1]".encode("utf-32")])
def test_bytes_json_takes_in_other_encodings_read_as_json_reads_them(text):
    assert jsontext.loads(text) == json.loads(text)


@pytest.mark.parametrize("indent", [None, 2])
def test_what_json_cannot_write_fails_with_jsons_own_error(indent):
    circular: list[object] = []
    circular.append(circular)
    for bad, kind in ((object(), TypeError), ({(1, 2): 1}, TypeError), ({"a": {1, 2}}, TypeError),
                      (circular, ValueError)):
        with pytest.raises(kind) as ours:
            jsontext.dumps(bad, indent=indent)
        with pytest.raises(kind) as theirs:
            json.dumps(bad, indent=indent)
        assert str(ours.value) == str(theirs.value)


def test_using_it_imports_neither_json_nor_re():
    probe = ("import sys\n"
             "from gpuscope import jsontext\n"
             "text = jsontext.dumps({'a': [1, 2.5, None, 'é']}, indent=2) + jsontext.dumps([1])\n"
             "value = jsontext.loads(b'{\"k\": [1, 2]}')\n"
             "print('[' + jsontext.dumps(value) + ', ' + jsontext.dumps(sorted(m for m in ('json', 're', 'enum') "
             "if m in sys.modules)) + ']')\n")
    assert fresh_json(probe, bare=True) == [{"k": [1, 2]}, []]
