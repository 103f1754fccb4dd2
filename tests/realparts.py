"""The one rule for tests that need a real part: a server binary, a database,
Prometheus, Chromium and Playwright, an optional library.

On a developer's machine a missing part skips the tests that need it. Under CI
it fails them: ``.ci/run`` installs every part and sets
``VERIF_REQUIRE_REAL_PARTS=1``, so a broken or forgotten install can never pass
as a skip. Every test that would skip for a missing real part goes through here:

    from realparts import import_real_part, missing_real_part

    # A library, at module level or in a fixture (returns the module):
    psycopg = import_real_part("psycopg", "the PostgreSQL journal needs the 'postgres' extra")

    # Anything else found missing (a binary, a server that will not start):
    binary = shutil.which("temporal")
    if binary is None:
        missing_real_part("no temporal binary (pip install temporalio)")

Both work at module level (the whole module is skipped, or fails to collect)
and inside a fixture or a test.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

SWITCH = "VERIF_REQUIRE_REAL_PARTS"


def real_parts_required() -> bool:
    """Whether a missing real part fails (CI) rather than skips (a developer's machine)."""
    return os.environ.get(SWITCH, "") not in ("", "0")


def missing_real_part(reason: str) -> NoReturn:
    """Skip, or under ``VERIF_REQUIRE_REAL_PARTS=1`` fail, saying what is missing."""
    if real_parts_required():
        pytest.fail(f"{reason} ({SWITCH} is set: it must be installed)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def import_real_part(module: str, reason: str) -> ModuleType:
    """``module`` imported, or :func:`missing_real_part` with ``reason``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing_real_part(f"{reason}: {exc}")
