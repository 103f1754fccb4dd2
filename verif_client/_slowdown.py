"""The client's pace after the service answered 429 ("too many requests").

A 429 slows everything the client sends, not just the call that got it: a
poll run or a bulk job is many calls of one client. The pace halves on every
429 (from the configured rate limit, or, without one, from the pace the client
was going at: the calls in flight over the refused call's duration), and no
request leaves before the 429's ``Retry-After`` has passed. Then, while
answers flow, it doubles every ``CLIMB_SECONDS``; back at the limit (or at
twice the pace it was cut from), the slowdown is lifted and the client sends
as before, at no cost per request.

Nothing of this runs before the first 429: the client installs it then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import anyio

from ._ratelimit import Limiter

# How slowly the pace climbs back: it doubles in this many seconds without a 429.
CLIMB_SECONDS: Final = 30.0
# Never slower than this (requests per second): a run always makes progress.
FLOOR: Final = 0.1


class Slowdown:
    """A limiter in front of the client's own (``inner``, if any) while slowed."""

    def __init__(
        self,
        inner: Limiter | None,
        ceiling: float,
        clock: Callable[[], float],
        on_lifted: Callable[[], None],
    ) -> None:
        self.inner = inner
        # Where the climb stops and the slowdown is lifted.
        self._ceiling = ceiling
        self._clock = clock
        self._on_lifted = on_lifted
        self._base = ceiling
        # When the pace was last cut (none yet: from the ceiling, no climb to make).
        self._since = float("-inf")
        self._resume_at = 0.0
        self._next_slot = float("-inf")

    @property
    def rate(self) -> float:
        """Requests per second allowed now."""
        climbed: float = self._base * 2.0 ** ((self._clock() - self._since) / CLIMB_SECONDS)
        return min(self._ceiling, climbed)

    @property
    def resume_at(self) -> float:
        """When requests may leave again (the clock's time): the latest 429's Retry-After."""
        return self._resume_at

    def refused(self, pace: float, retry_after: float | None, sent_at: float) -> float | None:
        """A 429 to a request sent at ``sent_at``: hold every request until
        ``retry_after`` seconds from now, and halve the pace (from the current
        one, or ``pace`` if slower); returns the new pace. None when the
        request left before the last cut: the many 429s to what was in flight
        at the old pace call for one cut, not one each."""
        now = self._clock()
        if retry_after is not None:
            self._resume_at = max(self._resume_at, now + retry_after)
        if sent_at < self._since:
            return None
        self._base = max(FLOOR, min(self.rate, pace) / 2.0)
        self._since = now
        return self._base

    async def acquire(self) -> None:
        now = self._clock()
        rate = self.rate
        if rate >= self._ceiling and now >= self._resume_at:
            self._on_lifted()
        else:
            # GCRA, one slot per request (see _ratelimit), starting after Retry-After.
            slot = max(self._next_slot, now, self._resume_at)
            self._next_slot = slot + 1.0 / rate
            if slot > now:
                await anyio.sleep(slot - now)
        if self.inner is not None:
            await self.inner.acquire()
