"""Fixtures for the nsys reader tests (helpers in nsysrec.py): installs, session-wide recordings.

When no nsys is provisioned the nsys tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nsysrec import Install, kill_tagged, record, require_installs, stats_csv


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def installs() -> dict[str, Install]:
    return require_installs()


class Recordings:
    """Lazily made recordings, one per (version, scenario), shared by the whole session."""

    SCENARIOS = {
        # name: (script args, extra nsys args)
        "spawn": (["spawn", "--features"], []),
        "fork": (["fork"], []),
        "fork_flag": (["fork", "--reregister", "--flush"], ["--trace-fork-before-exec=true"]),
    }

    def __init__(self, root: Path, installs: dict[str, Install]) -> None:
        self.root, self.installs = root, installs
        self.made: dict[tuple[str, str], Path] = {}
        self.stats: dict[tuple[str, str, str], list[dict]] = {}

    def get(self, key: str, scenario: str) -> Path:
        if (key, scenario) not in self.made:
            args, nsys_args = self.SCENARIOS[scenario]
            self.made[(key, scenario)] = record(self.installs[key], self.root / key, scenario, args,
                                                nsys_args=nsys_args)
        return self.made[(key, scenario)]

    def stats_rows(self, key: str, scenario: str, report: str) -> list[dict]:
        k = (key, scenario, report)
        if k not in self.stats:
            self.stats[k] = stats_csv(self.installs[key], self.get(key, scenario), report)
        return self.stats[k]


@pytest.fixture(scope="session")
def recordings(tmp_path_factory, installs) -> Recordings:
    rec = Recordings(tmp_path_factory.mktemp("nsys_recordings"), installs)
    yield rec
    kill_tagged()


@pytest.fixture(scope="session", autouse=True)
def _no_stray_agents():
    yield
    kill_tagged()
