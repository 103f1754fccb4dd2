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

from ._ratelimit import Limiter, RateLimiter
from ._slots import Slots

if TYPE_CHECKING:
    from . import _hooks


class Admission:
    """The rate limit and the connection slots of one client.

    Both belong to an event loop (anyio primitives, and our own limiter's
    clock): ``reset`` starts afresh on another one (``asyncio.run`` twice),
    since the old loop may have died with slots taken.
    """

    __slots__ = ("_hooks", "_max_connections", "rate", "rate_limit", "slots")

    def __init__(
        self,
        max_connections: int,
        rate_limit: float | None,
        rate_limiter: Limiter | None,
        hooks: _hooks.Dispatch | None,
    ) -> None:
        self._max_connections = max_connections
        # Ours to make (see admit); a poll at once reads it too (see _atonce).
        self.rate_limit = rate_limit
        self._hooks = hooks
        # The Limiter every attempt awaits (None: no rate to keep). Our own
        # (from rate_limit) is made on first use, on the loop that uses it.
        self.rate: Limiter | None = rate_limiter
        self.slots: Slots | None = None

    def reset(self) -> None:
        """Forget the slots, and our own rate limiter: they belonged to another loop."""
        self.slots = None
        if self.rate_limit is not None:
            self.rate = None

    def capacity(self) -> Slots:
        # Created on first use, on the running event loop: a wait for a slot
        # is one of its events (see _slots).
        if self.slots is None:
            self.slots = Slots(self._max_connections)
        return self.slots

    def in_flight(self) -> int:
        """Attempts holding a slot now."""
        return self._max_connections - (self.slots.free if self.slots else 0)

    def at_once(self, slots: Slots) -> bool:
        """Take a connection slot now if nothing must be waited for first.

        A call with no rate to keep and a slot free (the common case) then
        costs no coroutine and no event-loop pass here."""
        return self.rate is None and self.rate_limit is None and slots.take_now()

    async def admit(self, slots: Slots) -> None:
        """Wait for the rate limit, then for a connection slot (taken on return)."""
        if self.rate is None and self.rate_limit is not None:
            self.rate = RateLimiter(self.rate_limit)
        hooks = self._hooks
        if self.rate is not None:
            acquire = self.rate.acquire()
            await (acquire if hooks is None else hooks.wait(hooks.RATE_LIMIT, acquire))
        if not slots.take_now():
            waiting = slots.take()
            await (waiting if hooks is None else hooks.wait(hooks.CONNECTION, waiting))
