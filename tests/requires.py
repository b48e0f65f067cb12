"""Checks for optional parts that never import them in the pytest process.

``pytest.importorskip("torch")`` imports torch (35-80 s of the suite's time on a slow shared
machine, in a process that never uses it): the tests that need torch run it in subprocesses, so
knowing it is installed is enough. A skip here is a failure under ``CI=true`` (tests/ci_skips.py).
"""

from __future__ import annotations

import importlib.util

import pytest


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def torch() -> None:
    """Skip the calling test (or module, at module level) when torch is not installed."""
    if not installed("torch"):
        pytest.skip("torch not importable", allow_module_level=True)


def ray() -> None:
    """Skip the calling test (or module) when Ray is not installed (``pip install gpuscope[ray]``)."""
    if not installed("ray"):
        pytest.skip("ray not importable", allow_module_level=True)
