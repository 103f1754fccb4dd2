"""A poll run's polls awaited by its workers: on trio, with hooks or a
transport of the caller's, and wherever a poll cannot go at once (see
_pollchain). One cancel scope serves a worker's polls in a row."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import anyio

from ._errors import DecodeError, HTTPStatusError, VerifClientError
from ._pollpolicy import PollStatus
from ._pollwatch import Watch, unforeseen
from ._transport import FirstAttempt

if TYPE_CHECKING:
    from ._polling import PollStream

POLLS_BETWEEN_YIELDS: Final = 32


async def poll_in_a_row(
    stream: PollStream[Any],
    watch: Watch,
    first: FirstAttempt | None = None,
    most: int = POLLS_BETWEEN_YIELDS,
) -> bool:
    """Poll ``watch`` (its call's first attempt ``first``, if made already),
    then what falls due next, up to ``most`` polls; True if that many were
    made (the worker should let others run).

    A poll in flight (its retries and backoffs included) is cut at its
    id's deadline, and the id then ends TIMED_OUT, on time. One cancel
    scope serves the polls in a row, cut at each id's deadline in turn:
    a scope of its own per poll cost a tenth of a poll's CPU on asyncio,
    and its objects kept the garbage collector busy. On asyncio the
    shared deadlines cut it (a scope's own deadline, moved, is a timer
    made and cancelled per poll); an id whose deadline comes before one
    already kept (polled again, say) moves the scope's own.
    """
    scope = stream._backend.create_cancel_scope()
    deadlines = stream._deadlines
    own_deadline = False
    polls = 0
    try:
        with scope:
            while True:
                own_deadline = _cut_at(stream, scope, watch.deadline, own_deadline)
                await _poll(stream, watch, first)
                first = None
                polls += 1
                if scope.cancel_called:
                    # The deadline passed while the answer was being read:
                    # that answer counts, and the next poll gets a fresh scope.
                    return False
                if polls == most:
                    # (Only an in-process transport needs the yield: a
                    # pool's poll always waits for its answer.)
                    return most == POLLS_BETWEEN_YIELDS
                next_watch = stream._next_due()
                if next_watch is None:
                    return False
                watch = next_watch
    finally:
        if deadlines is not None:
            deadlines.discard(scope)
    # Only a cut gets here: the scope took its cancellation.
    stream._polled(watch, None, None, True)  # cut
    return False


def _cut_at(stream: PollStream[Any], scope: Any, deadline: float, own_deadline: bool) -> bool:
    """Have ``scope`` cancelled at ``deadline``; True if by a timer of its own."""
    deadlines = stream._deadlines
    if deadlines is not None:
        deadlines.discard(scope)
        # A deadline already past cuts at once, before a connection is
        # taken, as a scope's own deadline does on entry.
        if deadline > stream._now() and deadlines.add(scope, deadline):
            if own_deadline:
                scope.deadline = math.inf
            return False
    scope.deadline = deadline
    return True


async def _poll(stream: PollStream[Any], watch: Watch, first: FirstAttempt | None = None) -> None:
    """One poll: the call, with an unreadable answer asked again under
    ``policy.retry`` (the client retries the network failures itself).
    One coroutine for both: every poll in flight holds its chain of
    coroutines, and the garbage collector walks each link. With ``first``
    the poll began at once (see _pollchain) and its call goes on from there."""
    policy = stream._policy
    retry = policy.retry
    kind = watch.kind
    error: VerifClientError | None = None
    status: PollStatus | None = None
    if first is None:
        watch.polls += 1
        started = stream._now()
    else:
        started = first.began
    asked = 0
    while True:
        asked += 1
        given, first = first, None
        try:
            answer = await stream._call(
                kind.operation,
                {kind.request_id_param: watch.request_id},
                retry=retry,
                first=given,
            )
            watch.last = answer
            status = kind.judge(answer, policy, stream._dialect)
        except HTTPStatusError as exc:
            # A 429 says nothing about the id: ask again later, at the pace
            # the client has slowed to.
            if exc.status_code != 429:
                error, status = exc, PollStatus.FAILED
        except DecodeError as exc:
            pause = retry.backoff(asked, stream._rng)
            late = stream._now() + pause - started > retry.deadline
            if asked < retry.attempts and not late:
                await anyio.sleep(pause)
                continue
            error, status = exc, PollStatus.FAILED
        except VerifClientError as exc:
            error, status = exc, PollStatus.FAILED
        except Exception as exc:
            error, status = unforeseen(watch, exc), PollStatus.FAILED
        break
    stream._polled(watch, status, error, False)
    # The error's traceback holds this frame: kept here, the two would be
    # a cycle that outlives the outcome until the collector finds it.
    del error
