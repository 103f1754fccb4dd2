"""A call's way in: the rate to keep, then a connection slot.

Every HTTP attempt of a client passes here before it is written: first the
rate (``rate_limit=``'s own ``RateLimiter``, a ``rate_limiter=`` of the
user's, or, after a 429, the ``Slowdown`` that ``_pacing`` puts in front of
either), then one of ``max_connections`` slots, held until the answer is in.

A second rate limiter would go here: ``rate`` is the one ``Limiter`` every
attempt awaits, and any chain of them can stand in it (as the Slowdown does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from ._ratelimit import Limiter, RateLimiter

if TYPE_CHECKING:
    from . import _hooks


class Admission:
    """The rate limit and the connection slots of one client.

    Both belong to an event loop (anyio primitives, and our own limiter's
    clock): ``reset`` starts afresh on another one (``asyncio.run`` twice),
    since the old loop may have died with slots taken.
    """

    __slots__ = ("_hooks", "_max_connections", "_rate_limit", "rate", "slots")

    def __init__(
        self,
        max_connections: int,
        rate_limit: float | None,
        rate_limiter: Limiter | None,
        hooks: _hooks.Dispatch | None,
    ) -> None:
        self._max_connections = max_connections
        self._rate_limit = rate_limit
        self._hooks = hooks
        # The Limiter every attempt awaits (None: no rate to keep). Our own
        # (from rate_limit) is made on first use, on the loop that uses it.
        self.rate: Limiter | None = rate_limiter
        self.slots: anyio.Semaphore | None = None

    def reset(self) -> None:
        """Forget the slots, and our own rate limiter: they belonged to another loop."""
        self.slots = None
        if self._rate_limit is not None:
            self.rate = None

    def capacity(self) -> anyio.Semaphore:
        # Created on first use: anyio primitives belong to the running event
        # loop. A semaphore, not a CapacityLimiter: the limiter looks the
        # current task up on every acquire and release, which on Python 3.11
        # costs a system call (see _clock), and slots need no owner.
        if self.slots is None:
            self.slots = anyio.Semaphore(self._max_connections)
        return self.slots

    def in_flight(self) -> int:
        """Attempts holding a slot now."""
        return self._max_connections - (self.slots.value if self.slots else 0)

    def at_once(self, slots: anyio.Semaphore) -> bool:
        """Take a connection slot now if nothing must be waited for first.

        A call with no rate to keep and a slot free (the common case) then
        costs no coroutine and no event-loop pass here: the semaphore's
        acquire() always yields, even with slots to spare."""
        if self.rate is not None or self._rate_limit is not None:
            return False
        try:
            slots.acquire_nowait()
        except anyio.WouldBlock:
            return False
        return True

    async def admit(self, slots: anyio.Semaphore) -> None:
        """Wait for the rate limit, then for a connection slot (taken on return)."""
        if self.rate is None and self._rate_limit is not None:
            self.rate = RateLimiter(self._rate_limit)
        hooks = self._hooks
        if self.rate is not None:
            acquire = self.rate.acquire()
            await (acquire if hooks is None else hooks.wait(hooks.RATE_LIMIT, acquire))
        try:
            slots.acquire_nowait()
        except anyio.WouldBlock:
            waiting = slots.acquire()
            await (waiting if hooks is None else hooks.wait(hooks.CONNECTION, waiting))
