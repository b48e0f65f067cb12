"""Call gpuscope's real CLI dispatcher in-process for the findings and stacks commands.

``gpuscope/cli.py`` (owned by the lead) lists commands in ``COMMANDS``; until it names these two,
tests add them the way the lead will (one line each).
"""

from __future__ import annotations

import json

from gpuscope import cli

cli.COMMANDS.setdefault("findings", "what went wrong in a run: findings with evidence and fixes")
cli.COMMANDS.setdefault("stacks", "the Python stacks of every process of a running (or stuck) run")


def call(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def call_json(capsys, *argv: str) -> dict:
    code, out, err = call(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])
