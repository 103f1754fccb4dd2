"""Polling HasBeenVerified and MobileLocation_GetResult for many ids at once.

One scheduler per poll run: a heap of (due time, id) feeding a fixed set of
worker tasks, so thousands of waiting ids cost a heap entry each, not a
sleeping task each. Ids are taken from the caller's iterable as the run has
room for them (see ``_next_due``), never all up front: a million ids cost no more
per poll than ten, and the first poll leaves at once.

"Not done yet, ask again later" (the poll schedule of :class:`PollPolicy`) is
kept apart from "the call failed, retry it" (the short :class:`RetryPolicy`
inside one poll).

Classification of answers:

===========================================  ===========================
answer                                       meaning
===========================================  ===========================
``Verified`` true                            VERIFIED
``Verified`` nil                             pending
``Verified`` false                           DECLINED or pending, as
                                             ``PollPolicy.false_means`` says
``Verified`` false or nil, with an           FAILED (the service refused)
ErrorMessage
LocationResult present                       LOCATED
LocationResult absent, "Location not         pending (a denial looks the same,
available ..." or no ErrorMessage            so it ends TIMED_OUT)
LocationResult absent, other ErrorMessage    FAILED
SOAP fault, authentication error, bad input  FAILED at once
HTTP 429 (too many requests)                 retried after its Retry-After, the
                                             client slowed down; still refused:
                                             pending, polled again later
transport error, HTTP 502/503/504, an        retried under ``policy.retry``,
unreadable answer (DecodeError)              then FAILED
still pending at ``policy.timeout``          TIMED_OUT
===========================================  ===========================
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import random
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypedDict

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._clock import loop_backend, loop_clock
from ._compat import TypeVar
from ._errors import VerifClientError
from ._operations import GET_MOBILE_LOCATION, HAS_BEEN_VERIFIED, Operation
from ._pollawait import POLLS_BETWEEN_YIELDS, poll_in_a_row
from ._pollchain import Chain
from ._pollpolicy import (
    NO_JITTER,
    PollPolicy,
    PollStatus,
    VerifiedDialect,
)
from ._pollwatch import Watch
from ._results import LocationResult, VerificationResult
from ._retry import RetryPolicy
from ._settled import Outcomes, Settled
from ._transport import FirstAttempt
from ._transport._deadlines import deadlines_for

if TYPE_CHECKING:
    from ._hooks import Dispatch

logger = logging.getLogger("verif_client")


_R = TypeVar("_R", VerificationResult, LocationResult)


@attrs.frozen(slots=True)
class _Outcome(Generic[_R]):
    request_id: int
    status: PollStatus
    result: _R | None
    error: VerifClientError | None
    attempts: int
    elapsed: float


@attrs.frozen(slots=True)
class VerificationOutcome(_Outcome[VerificationResult]):
    """How waiting for one verification ended: ``status``, the last ``result``
    seen, the ``error`` when FAILED, the number of polls and seconds elapsed."""


@attrs.frozen(slots=True)
class LocationOutcome(_Outcome[LocationResult]):
    """How waiting for one location ended (see :class:`VerificationOutcome`)."""


Outcome = VerificationOutcome | LocationOutcome
"""Either kind of outcome: what ``poll_verifications_and_locations`` yields."""

# The outcome type a poll run yields; covariant, so that a run watching both
# kinds is typed as yielding their union (also what a bare ``PollStream`` means).
_O = TypeVar("_O", bound=Outcome, covariant=True, default=Outcome)


class CallOperation(Protocol):
    """All the poller needs of a client: call one operation with its
    parameters under a retry policy, and return its result. ``first``: the
    call's first attempt, made already by ``CallsAtOnce``."""

    def __call__(
        self,
        operation: Operation[Any],
        params: Mapping[str, object],
        *,
        retry: RetryPolicy,
        first: FirstAttempt | None = None,
    ) -> Awaitable[object]: ...


class CallAtOnce(Protocol):
    def abandon(self) -> None:
        """End the call in flight, if any, unheard (its poll's worker is cancelled)."""


class CallsAtOnce(Protocol):
    """Calls made without a coroutine (on asyncio, the client's own pool) of
    an operation whose one parameter is the request id: a call's answer
    comes to ``done(context, outcome)`` from the event loop, the result, a
    FirstAttempt for ``CallOperation`` to go on with (any refusal, error or
    timeout), or None if the attempt was cut at ``cut_at``.

    A caller makes its call object once (``caller``) and starts each of its
    calls on it, one in flight at a time: no object per call."""

    def ready(self) -> bool: ...

    def caller(self, done: Callable[[Any, object], None]) -> CallAtOnce: ...

    def start(
        self,
        call: Any,  # what caller() made
        op: Operation[Any],
        request_id: int,
        retry: RetryPolicy,
        cut_at: float,
        context: Any,
    ) -> bool: ...


# How many ids per worker a run watches at most: the room a waiting id needs
# is a heap entry, so this is generous; it only bounds how far ahead of the
# workers the intake runs when polls wait (initial_delay > 0).
_WATCHED_PER_WORKER: Final = 64
_WORKERS_STARTED_AT_ONCE: Final = 32


_OUTCOME_FIELDS: Final = ("request_id", "status", "result", "error", "attempts", "elapsed")


def _outcome_maker(cls: type[_O]) -> Callable[..., _O]:
    """``cls(request_id, status, result, error, attempts, elapsed)``, the same
    object, without the frame attrs' __init__ adds (one per poll): its slots
    set through their descriptors, as that __init__ sets them (no validator,
    no converter, no default to apply)."""
    assert tuple(field.name for field in attrs.fields(cls)) == _OUTCOME_FIELDS
    new = object.__new__
    set_id, set_status, set_result, set_error, set_attempts, set_elapsed = (
        getattr(_Outcome, name).__set__ for name in _OUTCOME_FIELDS
    )

    def make(
        request_id: int,
        status: PollStatus,
        result: object,
        error: VerifClientError | None,
        attempts: int,
        elapsed: float,
    ) -> _O:
        outcome = new(cls)
        set_id(outcome, request_id)
        set_status(outcome, status)
        set_result(outcome, result)
        set_error(outcome, error)
        set_attempts(outcome, attempts)
        set_elapsed(outcome, elapsed)
        return outcome

    return make


class PollKind(Generic[_O]):
    """What differs between polling verifications and polling locations."""

    def __init__(
        self,
        outcome: type[_O],
        operation: Operation[Any],
        judge: Callable[[object, PollPolicy, VerifiedDialect], PollStatus | None],
    ) -> None:
        self.outcome = _outcome_maker(outcome)
        self.operation = operation
        # Both polled operations take the request id as their one parameter.
        (self.request_id_param,) = operation.param_names
        self.judge = judge


def _judge_verification(
    result: object, policy: PollPolicy, dialect: VerifiedDialect
) -> PollStatus | None:
    assert isinstance(result, VerificationResult)
    if result.verified is True:
        return PollStatus.VERIFIED
    dialect.learn(result)
    if result.error_message:
        # Both shapes of "unknown id": nil or (from a plain bool) false, with a message.
        return PollStatus.FAILED
    if result.verified is None:
        return None
    final = policy.false_means == "final" or (policy.false_means == "auto" and dialect.nil_seen)
    return PollStatus.DECLINED if final else None


def _judge_location(
    result: object, policy: PollPolicy, dialect: VerifiedDialect
) -> PollStatus | None:
    assert isinstance(result, LocationResult)
    if result.location is not None:
        return PollStatus.LOCATED
    return None if result.pending else PollStatus.FAILED


VERIFICATION: Final = PollKind(VerificationOutcome, HAS_BEEN_VERIFIED, _judge_verification)
LOCATION: Final = PollKind(LocationOutcome, GET_MOBILE_LOCATION, _judge_location)
BOTH: Final[tuple[PollKind[Outcome], ...]] = (VERIFICATION, LOCATION)


class PollOptions(TypedDict, total=False):
    """How a poll run polls: ``policy`` (default ``PollPolicy()``) and
    ``max_concurrency`` (default 100, calls in flight at once)."""

    policy: PollPolicy
    max_concurrency: int


class PollRunOptions(PollOptions, total=False):
    """``PollOptions`` and ``keep_open`` (default False): keep the input
    open for ``add()`` until ``close_input()``."""

    keep_open: bool


class PollStream(Generic[_O]):
    """The outcomes of one poll run, as they settle (not in input order).

    Iterate it with ``async for``; it ends when every id given has exactly one
    outcome per kind and no more ids can come. ``add()`` watches more ids while
    the input is open (see ``keep_open``), ``close_input()`` ends the input.
    ``PollStream[VerificationOutcome]`` yields verification outcomes,
    ``PollStream[LocationOutcome]`` location outcomes.
    """

    def __init__(
        self,
        call: CallOperation,
        kinds: tuple[PollKind[_O], ...],
        policy: PollPolicy,
        workers: int,
        rng: random.Random,
        dialect: VerifiedDialect,
        hooks: Dispatch | None = None,
        at_once: CallsAtOnce | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers!r}")
        self._call = call
        self._dialect = dialect
        self._kinds = kinds
        self._policy = policy
        self._workers = workers
        self._rng = rng
        self._hooks = hooks
        self._now = loop_clock()
        self._backend = loop_backend()
        # On asyncio the polls' deadlines share one timer (see _pollawait).
        self._deadlines = deadlines_for(self._backend)
        # Polls made from their answers' callbacks (see _pollchain): asyncio only.
        self._at_once = at_once if self._deadlines is not None else None
        self._heap: list[tuple[float, int, Watch]] = []
        self._sequence = itertools.count()
        self._active = 0  # watches not yet settled (in the heap or being polled)
        self._input_open = True
        # Ids still to take from the caller's iterable, and how many watches
        # the run holds before it takes another (see _next_due).
        self._source: Iterator[int] | None = None
        self._source_error: BaseException | None = None
        self._room = workers * _WATCHED_PER_WORKER * len(kinds)
        # policy.delay(1, rng) is this shortened by its jitter (see _watch).
        self._first_delay = policy.delay(1, NO_JITTER)
        # Workers waiting for the dispatcher, and the event an async source's
        # feed waits on until one does (or the run has room again).
        self._idle_workers = 0
        self._hungry = anyio.Event()
        self._wakeup = anyio.Event()
        # When the dispatcher will look at the heap again on its own (-inf: it is awake).
        self._dispatcher_wakes_at = -math.inf
        # Whether the dispatcher holds a due watch until a worker is free.
        self._handing = False
        self._outcomes: Outcomes[_O] = Outcomes()

    def __aiter__(self) -> AsyncIterator[_O]:
        return Settled(self._outcomes)

    def add(
        self,
        request_id: int,
        *,
        timeout: float | None = None,
        first_poll_in: float | None = None,
    ) -> None:
        """Start watching one more id (first poll after ``policy.initial_delay``).

        ``timeout`` overrides ``policy.timeout`` for this id, e.g. with what is
        left of a deadline that started before a restart. ``first_poll_in``
        (seconds, at least 0) overrides the first delay, e.g. with what is left
        of it for an id whose request was sent a while ago; later polls follow
        the policy.
        """
        if not self._input_open:
            raise RuntimeError("the input of this poll run is closed")
        if first_poll_in is not None and not first_poll_in >= 0:
            raise ValueError(
                f"first_poll_in must be a number of seconds >= 0, not {first_poll_in!r}"
            )
        self._watch(request_id, timeout, first_poll_in=first_poll_in)

    def _watch(
        self,
        request_id: int,
        timeout: float | None = None,
        hand_over: bool = False,
        *,
        first_poll_in: float | None = None,
    ) -> Watch | None:
        """Watch ``request_id`` for each kind. With ``hand_over``, the first
        watch due at once is returned, not scheduled, if nothing in the heap
        is due: it would be the next popped."""
        now = self._now()
        if timeout is None:
            timeout = self._policy.timeout
        handed = None
        for kind in self._kinds:
            watch = Watch(request_id, kind, now, timeout)
            self._active += 1
            # policy.delay(1, self._rng), the same float, without its calls.
            jitter = self._policy.jitter
            if first_poll_in is not None:
                due = now + first_poll_in
            elif jitter:
                due = now + self._first_delay * (1.0 - jitter * self._rng.random())
            else:
                due = now + self._first_delay
            if (
                hand_over
                and handed is None
                and min(due, watch.deadline) <= now
                and not (self._heap and self._heap[0][0] <= now)
            ):
                handed = watch
            else:
                self._schedule(watch, due)
            if self._hooks is not None:
                # The timeout as given: (now + timeout) - now is not always it in floats.
                self._hooks.poll_added(self, kind.operation.name, request_id, timeout)
        return handed

    def close_input(self) -> None:
        """No more ids will be added: the stream ends once the last settles
        (and the ids given at the start have all been taken)."""
        self._input_open = False
        self._wakeup.set()

    @property
    def waiting(self) -> int:
        """Ids (per kind) taken from the input and not yet settled."""
        return self._active

    @property
    def due(self) -> int:
        """Polls due now that wait for a free connection (per kind; 0 while
        the run keeps up): how far behind it is, unlike ``waiting``, which
        counts ids between polls too. It looks at the due entries of the
        heap (and their children) only: its cost follows how far behind the
        run is, not how many ids it watches."""
        now = self._now()
        heap = self._heap
        size = len(heap)
        count = 1 if self._handing else 0
        # A heap's children are never due before their parent: a subtree
        # whose root is not due has nothing due.
        roots = [0] if heap else []
        while roots:
            index = roots.pop()
            if heap[index][0] <= now:
                count += 1
                roots.extend(child for child in (2 * index + 1, 2 * index + 2) if child < size)
        return count

    def _next_due(self) -> Watch | None:
        """A watch due now: from the heap, else a new id from the caller's
        iterable, if the run has room for it (taken here, not in a method of
        its own: a call fewer per poll).

        Called by a worker with nothing due: with no initial delay the id it
        takes is due at once and that worker polls it, so ids leave the
        iterable exactly as fast as polls finish. With a delay the ids wait
        in the heap, up to the run's room.
        """
        heap = self._heap
        clock = self._now
        while True:
            if heap and heap[0][0] <= clock():
                return heapq.heappop(heap)[2]
            source = self._source
            if source is None or self._active >= self._room:
                return None
            try:
                request_id = next(source)
            except Exception as exc:
                self._source = None
                self._wakeup.set()  # the run may be over
                if not isinstance(exc, StopIteration):
                    # Raised to the caller once what was taken has settled.
                    self._source_error = exc
                return None
            # Due at once, it is not put in the heap (see _watch).
            taken = self._watch(request_id, None, True)  # hand_over, positional
            if taken is not None:
                return taken

    def _schedule(self, watch: Watch, due: float) -> None:
        due = min(due, watch.deadline)
        heapq.heappush(self._heap, (due, next(self._sequence), watch))
        # Waking the dispatcher costs a task switch; it is only needed when it
        # sleeps past this watch's due time.
        if due < self._dispatcher_wakes_at:
            self._wakeup.set()

    async def _feed(self, source: AsyncIterable[int]) -> None:
        # As _next_due takes ids, for an async iterable, in a task of its own (a worker
        # waiting on it could not poll what falls due meanwhile): an id is
        # asked for when a worker has nothing to do and the run has room.
        checkpoint = loop_backend().checkpoint
        async for request_id in source:
            while not self._idle_workers or self._active >= self._room:
                self._hungry = anyio.Event()
                await self._hungry.wait()
            self._watch(request_id)
            # Let the dispatcher hand it to a worker before the next is asked for.
            await checkpoint()
        self.close_input()

    async def _dispatch(self, due_send: MemoryObjectSendStream[Watch]) -> None:
        heap = self._heap
        clock = self._now
        while self._input_open or self._active or self._source is not None:
            if heap and heap[0][0] <= clock():
                watch = heapq.heappop(heap)[2]
                try:
                    try:
                        # An idle worker takes it at once: no task switch for
                        # the dispatcher, which send() would always make.
                        due_send.send_nowait(watch)
                    except anyio.WouldBlock:
                        # Out of the heap, but still due and waiting (see due).
                        self._handing = True
                        try:
                            await due_send.send(watch)
                        finally:
                            self._handing = False
                except anyio.BrokenResourceError:
                    # Every worker is gone: the run is being torn down (the
                    # caller left it, or a worker's error cancels it), and a
                    # dispatcher woken just before the cancellation must not
                    # add an error of its own to that.
                    return
                continue
            self._wakeup = anyio.Event()
            if heap:
                self._dispatcher_wakes_at = heap[0][0]
                with anyio.move_on_after(heap[0][0] - clock()):
                    await self._wakeup.wait()
            else:
                self._dispatcher_wakes_at = math.inf
                await self._wakeup.wait()
            self._dispatcher_wakes_at = -math.inf

    async def _worker(self, due: MemoryObjectReceiveStream[Watch]) -> None:
        async with due:
            # A busy worker takes the next due watch (or a new id) itself: the
            # dispatcher's hand-off costs task switches per poll, and is only
            # needed to wake workers that have nothing to do.
            checkpoint = loop_backend().checkpoint
            at_once = self._at_once
            chain = None if at_once is None else Chain(self, at_once)
            first: FirstAttempt | None = None
            watch = self._next_due()
            while True:
                if watch is None:
                    self._idle_workers += 1
                    self._hungry.set()
                    try:
                        watch = await due.receive()
                    except anyio.EndOfStream:
                        return
                    finally:
                        self._idle_workers -= 1
                if chain is not None and first is None and chain.begin(watch):
                    try:
                        watch, first = await chain.ended()
                    finally:
                        chain.abandon()
                    continue
                # Where calls can go at once, one awaited poll (the pool
                # opens a connection, say), and the next goes at once if it can.
                if await poll_in_a_row(self, watch, first, 1 if chain else POLLS_BETWEEN_YIELDS):
                    # A transport that answers without waiting (the simulator
                    # in process) would otherwise never let the caller read
                    # the outcomes of an endless iterable.
                    await checkpoint()
                first = None
                watch = self._next_due()

    def _polled(
        self, watch: Watch, status: PollStatus | None, error: VerifClientError | None, cut: bool
    ) -> None:
        """Record a poll: settle the id, or schedule its next poll (``cut``:
        at its deadline, not judged). Its arguments are positional: a
        keyword's matching costs more than the call's other work, once per poll."""
        polls = watch.attempts = watch.polls
        now = self._now()
        hooks = self._hooks
        if hooks is not None:
            hooks.poll_polled(
                self,
                watch.kind.operation.name,
                watch.request_id,
                watch.polls,
                status,
                now - watch.started,
            )
        if status is None:
            if now < watch.deadline and not cut:
                self._schedule(watch, now + self._policy.delay(watch.polls + 1, self._rng))
                return
            status = PollStatus.TIMED_OUT
        # Settled (inline: a call fewer per poll). The outcome's fields in
        # order: request_id, status, result, error, attempts, elapsed.
        outcome = watch.kind.outcome(
            watch.request_id, status, watch.last, error, polls, now - watch.started
        )
        active = self._active = self._active - 1
        if hooks is not None:
            hooks.poll_settled(
                self,
                watch.kind.operation.name,
                watch.request_id,
                status,
                watch.polls,
                now - watch.started,
            )
        outcomes = self._outcomes
        outcomes.queue.append(outcome)
        if outcomes.came is not None:
            outcomes.wake()
        if not active:
            self._wakeup.set()
        if active == self._room - 1:
            self._hungry.set()
