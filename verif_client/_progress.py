"""Progress of a bulk run: one live line on a terminal, plain lines elsewhere.

Hand-written rather than ``rich``: the display is a single line of counts,
which needs only a carriage return, "erase to end of line" and the terminal's
width; a dependency (and its own idea of terminals) would buy nothing here.

The line is redrawn on a timer, not when rows settle: a job whose answers take
minutes still shows, from its first second, what is queued, being sent and
waiting. It never exceeds the terminal's width (fields are shed, least useful
first), so it never wraps and never leaves stale lines behind.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from typing import Final, TextIO

import anyio

from ._terminal import safe, width, write_or_drop
from .bulk._job import RowState
from .bulk._runner import Progress

# (label, state) in the order shown; every state a row can be in has a label.
_FIELDS: Final = (
    ("queued", RowState.QUEUED),
    ("sending", RowState.SENDING),
    ("waiting", RowState.SENT),
    ("verified", RowState.VERIFIED),
    ("declined", RowState.DECLINED),
    ("not verified", RowState.NOT_VERIFIED),
    ("failed", RowState.FAILED),
    ("unknown", RowState.UNKNOWN),
    ("invalid", RowState.INVALID),
)
# Kept longest as the line narrows: what needs the operator first.
_KEEP_ORDER: Final = (
    "done",
    "stopping",
    "slowed",
    "ETA",
    "queued",
    "sending",
    "waiting",
    "unknown",
    "failed",
    "verified",
    "declined",
    "not verified",
    "invalid",
    "rate",
    "elapsed",
)
# Throughput is measured over this many recent seconds, not since the start.
_WINDOW: Final = 30.0


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class ProgressDisplay:
    """Call with the run's :class:`Progress`; :meth:`run` redraws it every ``interval``."""

    def __init__(
        self,
        stream: TextIO = sys.stderr,
        *,
        interval: float | None = None,
        live: bool | None = None,
    ) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.interval = interval if interval is not None else (0.25 if self.live else 5.0)
        self.started = time.monotonic()
        self.progress: Progress | None = None
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque()
        self._drawn = False

    def __call__(self, progress: Progress) -> None:
        first = self.progress is None
        self.progress = progress
        if first:
            self.draw()

    async def run(self) -> None:
        """Redraw until cancelled."""
        while True:
            await anyio.sleep(self.interval)
            self.draw()

    def columns(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            return 80

    def draw(self) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        # The last column stays empty: a terminal may wrap a line that fills it.
        limit = self.columns() - 1 if self.live else None
        line = self.render(self.progress, now, limit)
        write_or_drop(self.stream, "\r" + line + "\x1b[K" if self.live else line + "\n")
        self._drawn = True

    def _rates(self, progress: Progress, now: float) -> tuple[float | None, float | None]:
        """Rows finished and rows sent per second, over the recent window."""
        sent = progress.total - progress.states[RowState.QUEUED]
        self._samples.append((now, progress.finished, sent))
        while len(self._samples) > 2 and now - self._samples[1][0] >= _WINDOW:
            self._samples.popleft()
        then, finished_then, sent_then = self._samples[0]
        if now - then < 1.0:
            return None, None
        span = now - then
        return (progress.finished - finished_then) / span, (sent - sent_then) / span

    @staticmethod
    def eta(
        progress: Progress, now: float, finish_rate: float | None, send_rate: float | None
    ) -> float | None:
        """Seconds left: recent throughput, bounded by the deadline (no row
        outlives its SMS by more than the deadline)."""
        pending = progress.pending
        if pending == 0:
            return 0.0
        queued = progress.states[RowState.QUEUED]
        bound: float | None = None
        if queued == 0 and progress.last_sent is not None:
            bound = max(0.0, progress.last_sent + progress.deadline - now)
        elif queued and send_rate:
            bound = queued / send_rate + progress.deadline
        estimate = pending / finish_rate if finish_rate else None
        if estimate is None:
            return bound
        return estimate if bound is None else min(estimate, bound)

    def render(self, progress: Progress, now: float, limit: int | None = None) -> str:
        fields: dict[str, str] = {"done": f"{progress.finished}/{progress.total} done"}
        if progress.stopping:
            fields["stopping"] = "STOPPING"
        for label, state in _FIELDS:
            if progress.states[state]:
                fields[label] = f"{label} {progress.states[state]}"
        finish_rate, send_rate = self._rates(progress, now)
        eta = self.eta(progress, now, finish_rate, send_rate)
        if eta is not None and progress.pending:
            fields["ETA"] = f"ETA {_duration(eta)}"
        if finish_rate is not None:
            fields["rate"] = f"{finish_rate:.1f}/s"
        if progress.slowed_to is not None:
            # The service answered 429: why the run goes slower than asked.
            fields["slowed"] = f"slowed to {progress.slowed_to:.1f} req/s by 429s"
        fields["elapsed"] = _duration(now - self.started)
        shown = [name for name in _KEEP_ORDER if name in fields]
        order = [
            *("done", "stopping", *(label for label, _ in _FIELDS)),
            *("ETA", "rate", "slowed", "elapsed"),
        ]

        def line() -> str:
            return " | ".join(fields[name] for name in order if name in shown)

        while limit is not None and width(line()) > limit and len(shown) > 1:
            shown.pop()
        text = line()
        if limit is not None and width(text) > limit:
            text = text[: max(0, limit)]
        return text

    def note(self, text: str) -> None:
        """A line of its own above the live line, which is drawn again below it."""
        if self.live:
            write_or_drop(self.stream, "\r\x1b[K" + safe(text) + "\n")
            self.draw()
        else:
            write_or_drop(self.stream, safe(text) + "\n")

    def close(self) -> None:
        self.draw()
        if self.live and self._drawn:
            write_or_drop(self.stream, "\n")
