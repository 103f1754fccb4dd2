"""A requests-per-second limit that runs on any anyio backend.

GCRA (the "virtual scheduling" form of a token bucket): one timestamp of
state, no lock and no background task. Each caller reserves the next free slot
synchronously (atomic within the event loop) and sleeps until it, so callers
are served in arrival order; a cancelled waiter only wastes its own slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import anyio


class Limiter(Protocol):
    """What the client calls before every HTTP request: return when it may go.

    :class:`RateLimiter` limits one process; a bulk job spread over several
    workers shares one in its journal (see ``Journal.rate_limiter``).
    """

    async def acquire(self) -> None:
        """Return when one more request may be sent (awaited before every
        HTTP attempt).
        """
        ...


def gcra_parameters(rate: float, burst: int) -> tuple[float, float]:
    """GCRA's emission interval and burst tolerance, in seconds, for ``rate``
    acquisitions per second in bursts of at most ``burst``."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate!r}")
    if burst < 1:
        raise ValueError(f"burst must be >= 1, got {burst!r}")
    interval = 1.0 / rate
    return interval, (burst - 1) * interval


class RateLimiter:
    """Allow at most ``rate`` acquisitions per second, with bursts of ``burst``."""

    def __init__(
        self,
        rate: float,
        *,
        burst: int = 1,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._interval, self._tolerance = gcra_parameters(rate, burst)
        self._clock = clock
        self._theoretical_arrival = float("-inf")

    def __repr__(self) -> str:
        return f"RateLimiter(rate={self.rate}, burst={self.burst})"

    def reserve(self) -> float:
        """Claim the next slot; return how long the caller must wait for it."""
        now = self._clock()
        arrival = max(self._theoretical_arrival, now)
        self._theoretical_arrival = arrival + self._interval
        return max(0.0, arrival - self._tolerance - now)

    async def acquire(self) -> None:
        """Wait for this process's next slot under the rate."""
        wait = self.reserve()
        if wait > 0:
            await anyio.sleep(wait)
