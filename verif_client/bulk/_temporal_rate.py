"""The job's ``--rate``, shared by its workers through leases.

The job workflow splits the rate evenly between the workers that hold a lease
(:meth:`JobWorkflow.lease`); a worker spends its share locally (GCRA: one
timestamp, no burst) and renews it every few seconds, or at once when another
worker waits for a share. The shares never sum past the rate: a worker that
joins gets a share as the holders renew theirs. A lease that cannot be renewed
(Temporal away) is kept: a server outage stops every worker's renewals alike.
This costs one update per worker every few seconds, whatever the load, where
reserving slots cost one per worker every half second.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Final

import anyio

from ._temporal_outage import OUTAGE, is_not_found, is_transient
from ._workflows import Lease

LEASE_SECONDS: Final = 10.0
# Renewed this long before the lease ends; sooner when a worker waits for a share.
_RENEW_AFTER: Final = 4.0
_RENEW_CROWDED: Final = 0.5
_ASK_AGAIN: Final = 0.25


class LeasedRate:
    """A :class:`Limiter` for one worker of a job whose rate is ``rate``."""

    def __init__(self, lease: Callable[[str, float, float], Awaitable[Lease]], rate: float) -> None:
        self.rate = rate
        self._lease = lease
        self.worker = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._share = 0.0
        self._renew_at = 0.0
        self._theoretical_arrival = float("-inf")
        self._lock = anyio.Lock()

    async def acquire(self) -> None:
        while True:
            if time.monotonic() >= self._renew_at and not self._lock.locked():
                async with self._lock:
                    await self._renew()
            if self._share > 0:
                break
            await anyio.sleep(_ASK_AGAIN)
        now = time.monotonic()
        slot = max(self._theoretical_arrival, now)
        self._theoretical_arrival = slot + 1.0 / self._share
        if slot > now:
            await anyio.sleep(slot - now)

    async def _renew(self) -> None:
        try:
            lease = await self._lease(self.worker, self.rate, LEASE_SECONDS)
        except Exception as exc:
            if is_not_found(exc):
                # The job has ended: its rows are all answered, and what this
                # worker still asks (a poll under way for a wait that moved
                # to another worker) takes no share from anyone.
                self._share = self._share or self.rate
                self._renew_at = math.inf
                return
            if not is_transient(exc):
                raise
            OUTAGE.begin("renewing the rate's lease", exc)
            # The share held is kept: every worker's renewals wait alike.
            self._renew_at = time.monotonic() + _ASK_AGAIN * 4
            return
        OUTAGE.end()
        self._share = lease.share
        # Waiting for a share, or holding one another worker waits for: soon.
        crowded = lease.waiting > 0 or lease.share == 0
        self._renew_at = time.monotonic() + (_RENEW_CROWDED if crowded else _RENEW_AFTER)

    async def release(self) -> None:
        """Give the share back (best effort): the others take it at once."""
        if self._share > 0:
            self._share = 0.0
            try:
                await self._lease(self.worker, self.rate, 0.0)
            except Exception as exc:
                if not is_transient(exc):
                    raise
