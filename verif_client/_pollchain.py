"""A worker's polls made from their answers' callbacks (asyncio and
uvloop, the client's own pool): no coroutine, task step or future per poll."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ._pollpolicy import PollStatus
from ._pollwatch import Watch, unforeseen
from ._transport import FirstAttempt, StaleConnection

if TYPE_CHECKING:
    from ._polling import CallAtOnce, CallsAtOnce, PollStream


class Chain:
    """One worker's polls made one after another from their answers'
    callbacks, with no coroutine, task step or future per poll: an answer
    is judged and recorded, and the next due poll written, in the event
    loop's callback that completed it. The worker awaits only the chain's
    end (``ended``): nothing due, a poll that cannot start at once (no
    connection ready, a rate to keep), or one whose call did not end in a
    result, which the worker then polls the awaited way from its first
    attempt (see CallsAtOnce). What a poll reports is the same either way.
    """

    __slots__ = ("_at_once", "_call", "_ended", "_stream")

    def __init__(self, stream: PollStream[Any], at_once: CallsAtOnce) -> None:
        self._stream = stream
        self._at_once = at_once
        # Made once, and each poll's call started on it: an object per poll
        # in flight is one more for the garbage collector to walk.
        self._call: CallAtOnce = at_once.caller(self._answered)
        self._ended: asyncio.Future[tuple[Watch | None, FirstAttempt | None]] | None = None

    def begin(self, watch: Watch) -> bool:
        """Start with ``watch``; False, and nothing done, if it cannot go at once."""
        if not self._at_once.ready() or not self._start(watch):
            return False
        deadlines = self._stream._deadlines
        assert deadlines is not None  # _at_once is only set on asyncio
        self._ended = deadlines.loop.create_future()
        return True

    def ended(self) -> asyncio.Future[tuple[Watch | None, FirstAttempt | None]]:
        """Done with what the worker polls next, and that poll's first attempt."""
        assert self._ended is not None
        return self._ended

    def abandon(self) -> None:
        # The worker is cancelled, or the chain ended (then nothing is in flight).
        self._call.abandon()

    def _start(self, watch: Watch) -> bool:
        stream = self._stream
        # An id at its deadline is cut at once by the awaited poll's scope.
        if watch.deadline <= stream._now():
            return False
        if not self._at_once.start(
            self._call,
            watch.kind.operation,
            watch.request_id,
            stream._policy.retry,
            watch.deadline,
            watch,
        ):
            return False
        watch.polls += 1
        return True

    def _answered(self, watch: Watch, outcome: object) -> None:
        stream = self._stream
        try:
            if isinstance(outcome, FirstAttempt):
                if isinstance(outcome.outcome, StaleConnection):
                    # Not made (the connection was stale): polled again
                    # as a poll whose connection the idle check turned away.
                    watch.polls -= 1
                    self._end(watch, None)
                else:
                    self._end(watch, outcome)
                return
            if outcome is None:
                stream._polled(watch, None, None, True)  # cut
            else:
                watch.last = outcome
                try:
                    status = watch.kind.judge(outcome, stream._policy, stream._dialect)
                except Exception as exc:
                    stream._polled(watch, PollStatus.FAILED, unforeseen(watch, exc), False)
                else:
                    stream._polled(watch, status, None, False)
            next_watch = stream._next_due()
            if next_watch is None:
                self._end(None, None)
                return
            # _start's, without its call (once per poll): an id at its
            # deadline is cut at once by the awaited poll's scope.
            if next_watch.deadline <= stream._now() or not self._at_once.start(
                self._call,
                next_watch.kind.operation,
                next_watch.request_id,
                stream._policy.retry,
                next_watch.deadline,
                next_watch,
            ):
                self._end(next_watch, None)
                return
            next_watch.polls += 1
        except Exception as exc:
            # A bug of ours: the worker raises it, as it would have.
            assert self._ended is not None
            if not self._ended.done():
                self._ended.set_exception(exc)

    def _end(self, watch: Watch | None, first: FirstAttempt | None) -> None:
        assert self._ended is not None
        if not self._ended.done():
            self._ended.set_result((watch, first))
