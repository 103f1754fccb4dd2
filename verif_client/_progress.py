"""Progress of a bulk run: a live line on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ._bulk import Progress


class ProgressDisplay:
    """Call with a :class:`Progress`; redraws at most every ``interval`` seconds."""

    def __init__(self, stream: TextIO = sys.stderr, *, interval: float | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.interval = interval if interval is not None else (0.2 if self.live else 5.0)
        self.started = time.monotonic()
        self._last = float("-inf")
        self._first_finished: int | None = None
        self._done_shown = False

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        if now - self._last < self.interval and progress.finished < progress.total:
            return
        self._last = now
        if self._first_finished is None:
            self._first_finished = progress.finished
        done = progress.finished >= progress.total
        if done and self._done_shown:
            return
        self._done_shown = done
        line = self.render(progress, now - self.started)
        if self.live:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def render(self, progress: Progress, elapsed: float) -> str:
        done_here = progress.finished - (self._first_finished or 0)
        rate = done_here / elapsed if elapsed > 0 else 0.0
        remaining = progress.total - progress.finished
        eta = f"{remaining / rate:.0f}s" if rate > 0 and remaining else "-"
        states = progress.states
        return (
            f"sent {progress.sent}/{progress.total} | verified {states['verified']} | "
            f"declined {states['declined']} | not verified {states['not_verified']} | "
            f"pending {progress.pending} | failed {states['failed'] + states['unknown']} | "
            f"invalid {states['invalid']} | {rate:.1f} rows/s | ETA {eta}"
        )

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
