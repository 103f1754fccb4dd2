"""A poll run's outcomes on their way to the caller: a queue, and a wake-up.

An anyio memory stream carried them, at a method call on each side per
outcome (``send_nowait``, ``receive_nowait``) for checks one run's queue
never needs (closed ends, waiting senders, a bound). Here the poller
appends to a deque, the caller's iterator pops from it, and an event
is made and set only when the caller waits for an outcome not yet there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, NoReturn

import anyio

from ._clock import cancel_pending, loop_backend
from ._compat import TypeVar

_O = TypeVar("_O")


class Outcomes(Generic[_O]):
    """The outcomes settled and not yet taken, in the order they settled."""

    __slots__ = ("came", "ended", "error", "queue")

    def __init__(self) -> None:
        self.queue: deque[_O] = deque()
        # Set once an outcome comes (or the run ends) while the caller waits;
        # None while nobody does.
        self.came: anyio.Event | None = None
        self.ended = False
        # What the caller's iterable raised: raised to the caller once every
        # outcome before it is taken.
        self.error: BaseException | None = None

    def wake(self) -> None:
        """An outcome came, or the end: the caller waiting for it goes on."""
        came = self.came
        if came is not None:
            self.came = None
            came.set()

    def end(self, error: BaseException | None) -> None:
        self.ended = True
        self.error = error
        self.wake()


class Settled(AsyncIterator[_O]):
    """The outcomes as they settle, one yield to the event loop fewer each.

    An outcome already there is taken at once (cancellation still checked);
    the caller waits only when there is none.
    """

    __slots__ = (
        "_cancel_pending",
        "_checkpoint_if_cancelled",
        "_create_event",
        "_outcomes",
        "_queue",
    )

    def __init__(self, outcomes: Outcomes[_O]) -> None:
        self._outcomes = outcomes
        self._queue = outcomes.queue
        # Looked up at the first step, on the loop (the sync client calls
        # __aiter__ from its own thread).
        self._checkpoint_if_cancelled: Callable[[], Awaitable[None]] | None = None
        self._cancel_pending: Callable[[], bool] | None = None
        # The backend's own: anyio.Event() looks the backend up each time.
        self._create_event: Callable[[], anyio.Event] = anyio.Event

    async def __anext__(self) -> _O:
        pending = self._cancel_pending
        if pending is None:
            pending = self._cancel_pending = cancel_pending()
            backend = loop_backend()
            self._checkpoint_if_cancelled = backend.checkpoint_if_cancelled
            self._create_event = backend.create_event
        if pending():
            check = self._checkpoint_if_cancelled
            assert check is not None
            await check()
        queue = self._queue
        if queue:
            return queue.popleft()
        outcomes = self._outcomes
        while not queue:
            if outcomes.ended:
                self._end()
            # Shared by callers that wait together: each takes its turn at the queue.
            came = outcomes.came
            if came is None:
                came = outcomes.came = self._create_event()
            await came.wait()
        return queue.popleft()

    def _end(self) -> NoReturn:
        # The caller's iterable failed: every id taken before has its outcome.
        error = self._outcomes.error
        if error is not None:
            raise error
        raise StopAsyncIteration
