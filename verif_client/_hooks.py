"""Hooks: what the client and the poller tell an observer, as it happens.

A hook is an object with any of the ``on_*`` methods of :class:`Hooks` (subclass
it and override what you need). Each method gets one frozen event. Events carry
names, numbers and error class names only: never the credentials, a parameter
value other than a request id, or a message body.

Hooks run synchronously on the event loop, so they must be quick (count, record,
hand off). One that raises is logged once and then ignored: watching a run must
never break it. With no hooks the client holds ``None`` and each hook point
costs one attribute test.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar
from urllib.parse import urlsplit

import anyio
import attrs

from ._pollpolicy import PollStatus
from ._service import Binding

logger = logging.getLogger("verif_client")

RATE_LIMIT: Final = "rate"
CONNECTION: Final = "connection"

SUCCESS: Final = "success"
ERROR: Final = "error"
CANCELLED: Final = "cancelled"


@attrs.frozen(slots=True)
class RequestStarted:
    """A call of an operation begins (before any rate-limit or connection wait).

    ``call_id`` ties together the events of one call, retries included.
    """

    call_id: int
    operation: str
    binding: Binding
    server_address: str
    server_port: int | None


@attrs.frozen(slots=True)
class RetryScheduled:
    """Attempt ``attempt`` failed with ``error_type`` (and HTTP ``status`` when an
    answer came); the call will try again after ``delay`` seconds."""

    call_id: int
    operation: str
    binding: Binding
    attempt: int
    status: int | None
    error_type: str
    duration: float
    delay: float


@attrs.frozen(slots=True)
class RequestEnded:
    """A call is over: ``outcome`` is "success", "error" or "cancelled".

    ``attempt`` counts the attempts made, ``duration`` is the whole call in
    seconds (waits and retries included), ``status`` the HTTP status of the last
    answer (None when none came), ``error_type`` the error's class name.
    """

    call_id: int
    operation: str
    binding: Binding
    outcome: str
    status: int | None
    attempt: int
    duration: float
    error_type: str | None


@attrs.frozen(slots=True)
class LimitWaited:
    """An attempt waited ``seconds`` for the rate limiter (``limit="rate"``,
    every attempt when a rate limit is set) or for a free connection slot
    (``limit="connection"``, only when none was free)."""

    call_id: int
    operation: str
    binding: Binding
    limit: str
    seconds: float


@attrs.frozen(slots=True)
class RateChanged:
    """The service answered ``operation`` with 429 and the client slowed
    everything it sends (a poll run's and a bulk job's calls included) to
    ``rate`` requests per second, holding requests for ``retry_after`` seconds
    when the answer said so; or, ``rate`` None, it is back to its own pace."""

    rate: float | None
    operation: str | None
    retry_after: float | None


@attrs.frozen(slots=True)
class PollAdded:
    """A poll run starts watching ``request_id`` for ``operation``."""

    operation: str
    request_id: int
    timeout: float


@attrs.frozen(slots=True)
class PollPolled:
    """A poll was answered; ``status`` is None while the id is still pending.
    ``age`` is seconds since the id was added."""

    operation: str
    request_id: int
    polls: int
    status: PollStatus | None
    age: float


@attrs.frozen(slots=True)
class PollSettled:
    """The poll run is done with the id, ``polls`` polls and ``age`` seconds after
    it was added: with its outcome's ``status``, or None when the run ended
    first (cancelled, or left before every outcome was read)."""

    operation: str
    request_id: int
    status: PollStatus | None
    polls: int
    age: float


class Hooks:
    """Subclass and override the events you want; the rest cost nothing."""

    def on_request_started(self, event: RequestStarted) -> None:
        """A call begins."""

    def on_retry_scheduled(self, event: RetryScheduled) -> None:
        """An attempt failed and will be repeated."""

    def on_request_ended(self, event: RequestEnded) -> None:
        """A call is over, whatever the outcome."""

    def on_limit_waited(self, event: LimitWaited) -> None:
        """An attempt waited for the rate limiter or a connection slot."""

    def on_rate_changed(self, event: RateChanged) -> None:
        """A 429 slowed the client down, or its pace is back."""

    def on_poll_added(self, event: PollAdded) -> None:
        """A poll run starts watching an id."""

    def on_poll_polled(self, event: PollPolled) -> None:
        """A poll of an id was answered."""

    def on_poll_settled(self, event: PollSettled) -> None:
        """A poll run is done with an id."""


_EVENT_METHODS: Final = (
    "on_request_started",
    "on_retry_scheduled",
    "on_request_ended",
    "on_limit_waited",
    "on_rate_changed",
    "on_poll_added",
    "on_poll_polled",
    "on_poll_settled",
)

_T = TypeVar("_T")


class _Call:
    """The dispatcher's record of one call in flight.

    Its times are ``time.perf_counter()``: the event loop's clock costs a few
    microseconds a reading through anyio, and a call's duration is real time.
    """

    __slots__ = ("attempt", "binding", "call_id", "operation", "started", "status")

    def __init__(self, call_id: int, operation: str, binding: Binding, started: float) -> None:
        self.call_id = call_id
        self.operation = operation
        self.binding = binding
        self.started = started
        self.attempt = 1
        self.status: int | None = None


# Unique in the process: one hook may watch several clients.
_CALL_IDS: Final = itertools.count(1)

# The call this task is in: set around one call, read by the hook points inside it.
_CURRENT: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "verif_client_call", default=None
)


class Dispatch:
    """Fans each event out to the hooks that want it; the client's and the
    poller's only contact with hooks."""

    # The kinds of wait, here too: the client reaches them through its
    # dispatch, so that a client without hooks never imports this module.
    RATE_LIMIT: Final = RATE_LIMIT
    CONNECTION: Final = CONNECTION

    def __init__(self, hooks: Sequence[object], base_url: str) -> None:
        self._listeners: dict[str, list[tuple[object, Callable[[object], None]]]] = {}
        for name in _EVENT_METHODS:
            self._listeners[name] = [
                (hook, method) for hook in hooks if (method := _override(hook, name)) is not None
            ]
        # Hooks that only watch poll runs spare every call its record.
        self._watches_calls = any(
            self._listeners[name]
            for name in (
                "on_request_started",
                "on_retry_scheduled",
                "on_request_ended",
                "on_limit_waited",
            )
        )
        # urllib, not httpx: the default connection layer never loads httpx.
        url = urlsplit(base_url)
        self._server = (url.hostname or "", url.port)
        self._failed: set[int] = set()
        # Per poll run: each unsettled (operation, id) with its start times and polls,
        # to close what a cancelled run leaves open.
        self._runs: dict[object, dict[tuple[str, int], list[list[float]]]] = {}

    def _emit(self, name: str, make: Callable[[], object]) -> None:
        listeners = self._listeners[name]
        if not listeners:
            return
        event = make()
        for hook, method in listeners:
            try:
                method(event)
            except Exception:
                # Logged once per hook: a broken hook on every request would
                # drown the log it is meant to spare.
                if id(hook) not in self._failed:
                    self._failed.add(id(hook))
                    logger.exception(
                        "hook %s failed in %s; its further failures are not logged",
                        type(hook).__name__,
                        name,
                    )

    # -- calls -------------------------------------------------------------

    async def call(self, operation: str, binding: Binding, exchange: Awaitable[_T]) -> _T:
        """Await ``exchange`` (one call, with its retries) between its start and end events."""
        if not self._watches_calls:
            return await exchange
        record = _Call(next(_CALL_IDS), operation, binding, time.perf_counter())
        host, port = self._server
        self._emit(
            "on_request_started",
            lambda: RequestStarted(record.call_id, operation, binding, host, port),
        )
        token = _CURRENT.set(record)
        try:
            result = await exchange
        except BaseException as exc:
            self._ended(record, exc)
            raise
        finally:
            _CURRENT.reset(token)
        # The codecs return a result only for an HTTP 200 answer.
        record.status = 200
        self._ended(record, None)
        return result

    def _ended(self, record: _Call, error: BaseException | None) -> None:
        if error is None:
            outcome, error_type = SUCCESS, None
        elif isinstance(error, anyio.get_cancelled_exc_class()):
            outcome, error_type = CANCELLED, CANCELLED
        else:
            outcome, error_type = ERROR, type(error).__name__
            record.status = _status_of(error)
        duration = time.perf_counter() - record.started
        self._emit(
            "on_request_ended",
            lambda: RequestEnded(
                record.call_id,
                record.operation,
                record.binding,
                outcome,
                record.status,
                record.attempt,
                duration,
                error_type,
            ),
        )

    async def backoff(
        self, attempt: int, failure: BaseException, began: float, delay: float
    ) -> None:
        """The pause before attempt ``attempt + 1``, announced as a retry."""
        record = _CURRENT.get()
        if record is not None:
            duration = anyio.current_time() - began
            status = _status_of(failure)
            self._emit(
                "on_retry_scheduled",
                lambda: RetryScheduled(
                    record.call_id,
                    record.operation,
                    record.binding,
                    attempt,
                    status,
                    type(failure).__name__,
                    duration,
                    delay,
                ),
            )
        await anyio.sleep(delay)
        if record is not None:
            record.attempt = attempt + 1

    async def wait(self, limit: str, acquire: Awaitable[None]) -> None:
        """Await a limiter's ``acquire``, reporting how long it took."""
        began = time.perf_counter()
        await acquire
        record = _CURRENT.get()
        if record is not None:
            seconds = time.perf_counter() - began
            self._emit(
                "on_limit_waited",
                lambda: LimitWaited(
                    record.call_id, record.operation, record.binding, limit, seconds
                ),
            )

    def rate_changed(
        self, rate: float | None, operation: str | None, retry_after: float | None
    ) -> None:
        self._emit("on_rate_changed", lambda: RateChanged(rate, operation, retry_after))

    # -- poll runs ---------------------------------------------------------

    def poll_added(self, run: object, operation: str, request_id: int, timeout: float) -> None:
        watches = self._runs.setdefault(run, {}).setdefault((operation, request_id), [])
        watches.append([anyio.current_time(), 0])
        self._emit("on_poll_added", lambda: PollAdded(operation, request_id, timeout))

    def poll_polled(
        self,
        run: object,
        operation: str,
        request_id: int,
        polls: int,
        status: PollStatus | None,
        age: float,
    ) -> None:
        watches = self._runs.get(run, {}).get((operation, request_id))
        if watches:
            watches[0][1] = polls
        self._emit("on_poll_polled", lambda: PollPolled(operation, request_id, polls, status, age))

    def poll_settled(
        self,
        run: object,
        operation: str,
        request_id: int,
        status: PollStatus,
        polls: int,
        age: float,
    ) -> None:
        unsettled = self._runs.get(run)
        if unsettled is None:
            return  # the run ended and reported the id already
        watches = unsettled.get((operation, request_id))
        if watches:
            watches.pop(0)
            if not watches:
                del unsettled[(operation, request_id)]
        self._emit(
            "on_poll_settled", lambda: PollSettled(operation, request_id, status, polls, age)
        )

    def poll_run_ended(self, run: object) -> None:
        """Report the ids a poll run leaves without an outcome as settled with None."""
        now = anyio.current_time()
        for (operation, request_id), watches in self._runs.pop(run, {}).items():
            for started, polls in watches:
                make = functools.partial(
                    PollSettled, operation, request_id, None, int(polls), now - started
                )
                self._emit("on_poll_settled", make)


def dispatch(hooks: object | Sequence[object] | None, base_url: str) -> Dispatch | None:
    """The dispatcher for a client's ``hooks=`` option; None when there is nothing to call."""
    if hooks is None:
        return None
    chosen = list(hooks) if isinstance(hooks, Sequence) else [hooks]
    for hook in chosen:
        if not any(callable(getattr(hook, name, None)) for name in _EVENT_METHODS):
            raise TypeError(
                f"hooks: {type(hook).__name__} has none of the methods {', '.join(_EVENT_METHODS)}"
            )
    return Dispatch(chosen, base_url) if chosen else None


def _override(hook: object, name: str) -> Callable[[object], None] | None:
    method = getattr(hook, name, None)
    if not callable(method):
        return None
    # The base class's empty method: skipping it spares building the event.
    if getattr(type(hook), name, None) is getattr(Hooks, name):
        return None
    return method  # type: ignore[no-any-return]


def _status_of(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None
