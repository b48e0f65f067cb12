"""gpuscope.choices.Choices behaves as the ``class X(str, enum.Enum)`` it replaces, in everything
gpuscope does with one, without importing enum."""

from __future__ import annotations

import copy
import enum
import json
import pickle
import sqlite3

import pytest

from gpuscope import jsontext
from gpuscope.choices import Choices
from gpuscope.processes import Reason
from gpuscope.status import RunStatus
from tests.fresh_python import fresh_json


class Colour(Choices):
    RED = "red"
    DARK_BLUE = "dark-blue"

    @property
    def warm(self) -> bool:
        return self is Colour.RED


class EnumColour(str, enum.Enum):
    RED = "red"
    DARK_BLUE = "dark-blue"


def test_members_are_their_text_as_a_str_enums_members_are():
    for ours, theirs in zip(Colour, EnumColour):
        assert ours == theirs == theirs.value and hash(ours) == hash(theirs)
        assert (ours.name, ours.value) == (theirs.name, theirs.value)
        assert isinstance(ours, str) and type(ours.value) is str
        assert {ours: 1}[theirs.value] == 1 and {theirs.value: 1}[ours] == 1
        assert str(ours) == f"{ours}" == "{}".format(ours) == ours.value
        assert f"{ours:>10}" == f"{ours.value:>10}"
        assert repr(ours) == repr(theirs).replace("EnumColour", "Colour")
    assert [m.name for m in Colour] == [m.name for m in EnumColour] and len(Colour) == len(EnumColour) == 2
    assert Colour.RED.warm and not Colour.DARK_BLUE.warm


def test_the_class_finds_a_member_by_its_text_or_refuses_it():
    assert Colour("red") is Colour.RED and Colour(Colour.RED) is Colour.RED and Colour(EnumColour.RED) is Colour.RED
    for bad in ("RED", "blue", None, 3):
        with pytest.raises(ValueError, match="is not a valid Colour"):
            Colour(bad)
        with pytest.raises(ValueError):
            EnumColour(bad)


def test_members_pickle_and_copy_as_themselves():
    for member in Colour:
        assert pickle.loads(pickle.dumps(member)) is member
        assert copy.copy(member) is member and copy.deepcopy(member) is member


def test_members_are_stored_and_written_as_their_text():
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (s TEXT)")
        conn.execute("INSERT INTO t VALUES (?)", (Colour.DARK_BLUE,))
        assert conn.execute("SELECT s, typeof(s) FROM t").fetchone() == ("dark-blue", "text")
    value = {"status": Colour.RED, Colour.DARK_BLUE: [Colour.RED]}
    expected = json.dumps({"status": EnumColour.RED, EnumColour.DARK_BLUE: [EnumColour.RED]})
    assert json.dumps(value) == jsontext.dumps(value) == expected


def test_two_members_cannot_share_a_text():
    with pytest.raises(ValueError, match="DARK's already"):
        type("Twice", (Choices,), {"DARK": "d", "DIM": "d"})


def test_gpuscopes_sets_keep_their_members_and_texts():
    assert [(m.name, m.value) for m in RunStatus] == [
        ("RUNNING", "running"), ("EXITED", "exited"), ("FAILED", "failed"), ("STOPPED", "stopped"), ("ERROR", "error")]
    assert [m for m in RunStatus if m.final] == [RunStatus.EXITED, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.ERROR]
    assert Reason("nsys-agent") is Reason.NSYS_AGENT and len(Reason) == 7


def test_the_status_and_membership_modules_import_no_enum():
    probe = ("import sys\n"
             "from gpuscope import processes, status\n"
             "print('%d' % ('enum' in sys.modules))\n")
    assert fresh_json(probe, bare=True) == 0
