"""Argparse value types shared by ``verif-client`` and ``python -m verif_client.simulator``.

Each refuses a bad value in one line naming it and what was wanted, so a typo
never reaches the code as a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final, TypeVar

T = TypeVar("T")


def checked(parse: Callable[[str], T], check: Callable[[T], bool], want: str) -> Callable[[str], T]:
    """An argparse type: ``parse``, then refuse what fails ``check`` in one line."""

    def convert(text: str) -> T:
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not check(value):
            raise argparse.ArgumentTypeError(f"{text!r}: want {want}")
        return value

    return convert


PORT: Final = checked(int, lambda port: 0 <= port <= 65535, "a port from 0 to 65535")
COUNT: Final = checked(int, lambda count: count >= 0, "a whole number >= 0")
POSITIVE_COUNT: Final = checked(int, lambda count: count >= 1, "a whole number >= 1")
POSITIVE: Final = checked(float, lambda number: number > 0, "a number > 0")
SECONDS: Final = checked(float, lambda seconds: 0 <= seconds < float("inf"), "seconds >= 0")
FRACTION: Final = checked(float, lambda fraction: 0 <= fraction <= 1, "a fraction from 0 to 1")


_YES: Final = frozenset({"1", "true", "yes", "on"})
_NO: Final = frozenset({"0", "false", "no", "off"})


def _yes_or_no(text: str) -> bool | None:
    word = text.strip().lower()
    return (word in _YES) if word in _YES | _NO else None


YES_NO: Final = checked(_yes_or_no, lambda _: True, "yes or no (1, true, yes; 0, false, no)")
