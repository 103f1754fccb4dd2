"""When a worker fetches activities: a send once all of its rows can be sent
at once, an answers activity while its polls keep up.

A send activity's rows are recorded ``unknown`` if its worker dies before it
reports: so every row a worker holds must be in flight, none waiting behind
the worker's ``--concurrency``. The SDK's fixed activity slots kept that by
allowing ``concurrency / group`` activities at once, but a slot stayed taken
while its activity reported to the server and the next one was fetched (a
quarter of the sending time). Here a slot is capacity for SMS requests, given
back row by row as each request ends: the next activity is fetched while the
last one's slowest rows and its report are still under way, and is only
fetched when there is room to send all of its rows at once.

Capacity is counted in units (one SMS request in flight). A slot is reserved
(before the SDK polls the server) with a group's units: the job's, or the
most rows of the last few activities; an activity takes its slot's units when
it starts, gives back what it does not need, borrows what it lacks from the
units free, and gives back one unit as each row's request ends. Whatever a
slot still holds when the SDK releases it comes back then. The worker's own
limiter on requests in flight stays the hard cap: this only decides when to
fetch.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from typing import Final

import temporalio.worker

# Activities whose sizes set a slot's: enough that a batch's tail is not
# taken for the group, few enough that a worker moving to a job of smaller
# groups follows it soon.
_SIZES_KEPT = 4
# A worker fetches answers while fewer of its polls are due than this many
# rounds of its connections (a second of polls at the service's usual 200
# ms). Past that, answers it took would wait behind its own while other
# workers' connections idle: the job's end waited on one worker's backlog
# (3-14 s after the last SMS, in runs of 8 workers; about 4 s with this). Ids
# between polls do not count: a worker watching thousands of people who have
# not answered yet, each polled every few seconds, keeps up.
ANSWERS_ROUNDS: Final = 5
# How often a worker whose polls are behind looks again (cheap: a look at the
# due polls of its streams, one a polling setting).
_BACKLOG_RECHECK: Final = 0.05


class _Units(temporalio.worker.SlotPermit):
    def __init__(self, units: int) -> None:
        self.units = units


class SendCapacity(temporalio.worker.CustomSlotSupplier):
    """The activity slots of a worker's sends, sized by its ``concurrency``."""

    def __init__(self, concurrency: int, largest_group: int, *, group: int | None = None) -> None:
        self.concurrency = concurrency
        self.free = concurrency
        # What a slot reserves: serving one job, its group (``group``);
        # serving any job, the most rows of the last few activities (before
        # the first, as many as any activity can have). Not the last one's:
        # a batch's tail, or rows handed back, are fewer, and sized after
        # them a slot found room for that many, so the next full activity
        # sent that many and handed the rest back.
        self.per_slot = min(group or largest_group, concurrency)
        self._sizes: collections.deque[int] | None = (
            None if group is not None else collections.deque(maxlen=_SIZES_KEPT)
        )
        self._started: collections.deque[_Units] = collections.deque()
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False
        # Slots reserved whose poll has not yet brought a task or been given up.
        self._polling = 0
        self._settled: list[asyncio.Future[None]] = []

    def close(self) -> None:
        """The worker stops: it fetches no send activity any more, and an
        activity fetched before sends nothing (its rows go back)."""
        self._closed = True

    async def settle(self, patience: float) -> None:
        """Wait, ``patience`` seconds at most, for the polls under way to
        bring their tasks (handed back at once: see claim) or to be given up.
        A task the server hands over as the SDK shuts its worker down can be
        lost, and a send activity lost is its rows `unknown`, never sent."""
        if self._polling:
            waiter = asyncio.get_running_loop().create_future()
            self._settled.append(waiter)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, patience)

    async def reserve_slot(self, ctx: temporalio.worker.SlotReserveContext) -> _Units:
        # Closed: wait until the SDK gives up the reservation (cancels it).
        while self._closed or self.free < self.per_slot:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self.free -= self.per_slot
        self._polling += 1
        return _Units(self.per_slot)

    def try_reserve_slot(self, ctx: temporalio.worker.SlotReserveContext) -> _Units | None:
        # No send activity is taken eagerly (handed over with the completion
        # of a workflow task of this process, which may be stopping): each
        # is fetched, when there is room for it, like any other.
        return None

    def mark_slot_used(self, ctx: temporalio.worker.SlotMarkUsedContext) -> None:
        assert isinstance(ctx.permit, _Units)
        self._started.append(ctx.permit)
        self._polled()

    def release_slot(self, ctx: temporalio.worker.SlotReleaseContext) -> None:
        assert isinstance(ctx.permit, _Units)
        if ctx.slot_info is None:
            self._polled()  # reserved, never used
        self.give_back(ctx.permit, ctx.permit.units)

    def _polled(self) -> None:
        self._polling = max(0, self._polling - 1)
        if not self._polling:
            _resolve_all(self._settled)

    def claim(self, rows: int) -> _Units:
        """The units of an activity of ``rows`` rows that starts now: its
        slot's (slots are alike: whichever started first), trimmed to
        ``rows`` or topped up from the units free (fewer than ``rows`` when
        none are: its other rows are not sent)."""
        units = self._started.popleft() if self._started else _Units(0)
        if self._closed:
            # Fetched as the worker began to stop: none of it is sent here.
            self.give_back(units, units.units)
            return units
        if rows > 0 and self._sizes is not None:
            self._sizes.append(min(rows, self.concurrency))
            self.per_slot = max(self._sizes)
            self._wake()
        if units.units > rows:
            self.give_back(units, units.units - rows)
        else:
            borrowed = min(self.free, rows - units.units)
            self.free -= borrowed
            units.units += borrowed
        return units

    def give_back(self, units: _Units, count: int) -> None:
        count = min(count, units.units)
        if count <= 0:
            return
        units.units -= count
        self.free += count
        self._wake()

    def _wake(self) -> None:
        if self.free >= self.per_slot:
            _resolve_all(self._waiters)


def _resolve_all(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
    waiters.clear()


class AnswersCapacity(temporalio.worker.CustomSlotSupplier):
    """The activity slots of a worker's answers: unbounded while its polls
    keep up, that is while fewer than ``limit`` of them are due and wait for
    a connection (``backlog()``). Past that it fetches no more until they
    fall below, and the answers it leaves queued go to workers with
    connections to spare. A worker with no answers activity always fetches
    one: a job whose every worker is behind (its ``--rate``, say) goes on at
    the pace of its polls."""

    def __init__(self, backlog: Callable[[], int], limit: int) -> None:
        self._backlog = backlog
        self.limit = limit
        self.running = 0

    def _behind(self) -> bool:
        return self.running > 0 and self._backlog() >= self.limit

    async def reserve_slot(
        self, ctx: temporalio.worker.SlotReserveContext
    ) -> temporalio.worker.SlotPermit:
        # Looked at again, not woken: the backlog falls as polls settle,
        # inside the poll stream, on its hottest path.
        while self._behind():  # noqa: ASYNC110
            await asyncio.sleep(_BACKLOG_RECHECK)
        return temporalio.worker.SlotPermit()

    def try_reserve_slot(
        self, ctx: temporalio.worker.SlotReserveContext
    ) -> temporalio.worker.SlotPermit | None:
        return None if self._behind() else temporalio.worker.SlotPermit()

    def mark_slot_used(self, ctx: temporalio.worker.SlotMarkUsedContext) -> None:
        self.running += 1

    def release_slot(self, ctx: temporalio.worker.SlotReleaseContext) -> None:
        if ctx.slot_info is not None:
            self.running -= 1
