"""Which provisioned Nsight Systems releases the recording tests use.

Two lists, because the suite has two kinds of nsys tests:

- ``VERSIONS``, for the *reader* (its figures against ``nsys stats``): the oldest and the newest
  provisioned release, 2022.4 and 2024.2, the two report-name and export-layout generations.
- ``BEHAVIOUR``, for what a *recording* does (gpuscope's runs under nsys, stop, interrupt,
  diagnostics): the newest release only.

``GPUSCOPE_TEST_ALL_NSYS=1`` runs every test on every provisioned release (2022.4, 2023.4,
2024.2) and every reader scenario on each. That matrix takes well over an hour of serial nsys time
on the shared 2-core runner (nsys recordings take a machine-wide lock, so they never overlap),
which the CI limit cannot afford; it is the run to make before changing nsys code.
"""

from __future__ import annotations

import os

ALL = ("2022.4", "2023.4", "2024.2")
OLDEST, NEWEST = ALL[0], ALL[-1]
FULL = os.environ.get("GPUSCOPE_TEST_ALL_NSYS") == "1"
VERSIONS = ALL if FULL else (OLDEST, NEWEST)
BEHAVIOUR = ALL if FULL else (NEWEST,)


def pairs(scenarios, main: str) -> list[tuple[str, str]]:
    """(release, scenario) pairs for the reader: every scenario on the newest release, the
    ``main`` one on the others (all of them on all releases with GPUSCOPE_TEST_ALL_NSYS=1)."""
    return [(key, s) for key in VERSIONS for s in scenarios if FULL or key == NEWEST or s == main]
