"""The rows-per-state table that ``bulk run``, ``bulk status`` and ``demo`` print.

Its own module so that the demo (``_demo``) can print it without importing the
CLI (``_cli``), which imports the demo.
"""

from __future__ import annotations

import sys

from ._terminal import write_or_drop
from .bulk._job import FINAL_STATES


def print_counts(counts: dict[str, int]) -> None:
    """One line per state (final states even at 0, others when not 0), then the total."""
    width = max(len(state) for state in counts)
    lines = [
        f"{state:<{width}}  {count:>8}\n"
        for state, count in counts.items()
        if count or state in FINAL_STATES
    ]
    write_or_drop(sys.stdout, "".join(lines) + f"{'total':<{width}}  {sum(counts.values()):>8}\n")
