"""The poller's calls made without a coroutine, on the client's own pool.

A poll's first attempt starts at once on a connection ready now
(``ConnectionPool.send_at_once``) and its answer is decoded from the
connection's callback: no coroutine, no task, no event-loop pass per poll,
which is most of what a poll costs (docs/performance.md). Only the plain case
is taken here; anything else goes back as a ``FirstAttempt`` to the awaited
call (``_exchange.Exchange.run``), so that retries, error mapping and logging
stay in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._answercache import MAX_BODY, MISSING
from ._codec import Codec, Credentials, HTTPRequest
from ._exchange import Exchange, log_attempt, logger
from ._operations import Operation
from ._retry import RetryPolicy
from ._service import Binding
from ._slots import Slots
from ._transport import Answer, FirstAttempt
from ._transport._pool import AttemptAtOnce, ConnectionPool
from ._transport._spliced import IdRequests

if TYPE_CHECKING:
    from ._client import VerificationClient


class PoolCallsAtOnce:
    """``_polling.CallsAtOnce`` on the client's own pool.

    The poller's calls made without a coroutine: a call's first attempt
    on a connection ready now (``ConnectionPool.send_at_once``), its answer
    decoded from the connection's callback.

    Only the plain case is taken here: no rate to keep, a slot and a
    connection free, an answer decoded to a result. Anything else (a
    refusal, an error, a timeout) goes back to the caller as a FirstAttempt,
    for the client's retry loop to take as its first attempt's: retries,
    error mapping and logging stay in one place (``Exchange.run``).
    """

    __slots__ = ("_admission", "_client", "_codecs", "_credentials", "_exchange", "_requests")

    def __init__(
        self,
        exchange: Exchange,
        client: VerificationClient,
        codecs: Mapping[Binding, Codec],
        credentials: Credentials | None,
    ) -> None:
        self._exchange = exchange
        self._admission = exchange.admission
        # Each call goes in the client's binding at the time, as an awaited call does.
        self._client = client
        self._codecs = codecs
        self._credentials = credentials
        # Per operation, the codec (the binding's) and its requests prebuilt
        # with the id spliced in (see _transport._spliced), or None where the
        # id cannot be.
        self._requests: dict[str, tuple[Codec, IdRequests | None]] = {}

    def ready(self) -> bool:
        """Calls can start at once on the running event loop (asyncio or
        uvloop, our own pool, used on this loop already)."""
        exchange = self._exchange
        pool = exchange.connections
        return (
            isinstance(pool, ConnectionPool)
            and exchange.admission.slots is not None
            and pool.ready_at_once(exchange.owner)
        )

    def caller(self, done: Callable[[Any, object], None]) -> PoolCallAtOnce:
        """A caller's call object, which each of its calls is started on in
        turn (see start): ``done(context, outcome)`` gets each call's
        result, a FirstAttempt, or None if the attempt was cut at ``cut_at``."""
        return PoolCallAtOnce(self._exchange, done)

    def start(
        self,
        call: PoolCallAtOnce,
        op: Operation[Any],
        request_id: int,
        retry: RetryPolicy,
        cut_at: float,
        context: Any,
    ) -> bool:
        """Start a call on ``call`` (none of its calls in flight); False (and
        nothing sent) if it cannot start at once."""
        exchange = self._exchange
        pool = exchange.connections
        admission = self._admission
        slots = admission.slots
        clock = exchange.clock
        # Admission.at_once's, written here (its call and the slot's take
        # were two of a poll's calls): no rate to keep, and a slot free.
        if (
            exchange.closed
            or slots is None
            or slots.free <= 0
            or admission.rate is not None
            or admission.rate_limit is not None
            or clock is None
            or not isinstance(pool, ConnectionPool)
        ):
            return False
        slots.free -= 1
        binding = self._client.binding
        codec = self._codecs[binding]
        # _request's usual case, without its call: this codec's requests
        # prebuilt, and an id they take.
        kept = self._requests.get(op.name)
        request: HTTPRequest | bytes | None = (
            kept[1].render(request_id)
            if kept is not None and kept[0] is codec and kept[1] is not None
            else None
        )
        if request is None:
            try:
                request = self._request(pool, codec, op, request_id)
            except Exception:
                # Encoded again by the call that takes it, and raised there.
                slots.release()
                return False
        call.binding = binding
        call.op = op
        call.codec = codec
        call.slots = slots
        call.began = clock()
        call.context = context
        # exchange.time_limit(retry, 0.0), the same float, without its call
        # nor min's and max's.
        time_limit = exchange.timeout
        left = retry.deadline - 0.0
        if left < time_limit:
            time_limit = left
        attempt = pool.send_at_once(
            request,
            time_limit if time_limit > 0.0 else 0.0,
            cut_at,
            exchange.max_response_bytes,
            op.name,
            _answered_at_once,
            call,
            op.idempotent,
        )
        if attempt is None:
            slots.release()
            call.context = None
            return False
        call.attempt = attempt
        return True

    def _request(
        self, pool: ConnectionPool, codec: Codec, op: Operation[Any], request_id: int
    ) -> HTTPRequest | bytes:
        """The request: prebuilt bytes with the id spliced in where it can be."""
        credentials = self._credentials
        kept = self._requests.get(op.name)
        if kept is not None and kept[0] is codec:
            requests = kept[1]
        else:
            # First of the run, or the client's binding changed since.
            (name,) = op.param_names
            requests = pool.id_requests(
                lambda mark: codec.encode(op, {name: mark}, credentials=credentials)
            )
            self._requests[op.name] = (codec, requests)
        if requests is not None:
            rendered = requests.render(request_id)
            if rendered is not None:
                return rendered
        return codec.encode(op, {op.param_names[0]: request_id}, credentials=credentials)


class PoolCallAtOnce:
    """One caller's calls started by PoolCallsAtOnce, one at a time: what
    the call in flight was started with."""

    __slots__ = (
        "attempt",
        "began",
        "binding",
        "codec",
        "context",
        "done",
        "exchange",
        "op",
        "slots",
    )

    # Set by PoolCallsAtOnce.start for each call.
    binding: Binding
    op: Operation[Any]
    codec: Codec
    slots: Slots
    began: float
    context: Any

    def __init__(self, exchange: Exchange, done: Callable[[Any, object], None]) -> None:
        self.exchange = exchange
        self.done = done
        self.attempt: AttemptAtOnce | None = None

    def abandon(self) -> None:
        """The caller is gone: the call in flight, if any, ends unheard."""
        attempt = self.attempt
        # Held no longer, nor the caller's context: a cancelled caller's
        # traceback holds this object, and the collector would find them there.
        self.attempt = self.context = None
        if attempt is not None and not attempt.ended:
            attempt.abandon()
            self.slots.release()


def _answered_at_once(call: PoolCallAtOnce, outcome: Answer | Exception | None) -> None:
    call.attempt = None  # ended: nothing to abandon, nor to keep alive
    slots = call.slots
    # Slots.release's, without its call (once per poll).
    if slots.waiting:
        slots.release()
    else:
        slots.free += 1
    if outcome is None:
        call.done(call.context, None)  # cut at the caller's own deadline
        return
    if not isinstance(outcome, Exception):
        exchange = call.exchange
        status, headers, body = outcome
        op = call.op
        # The decoder's kept result looked up here, as its decode() would
        # first (two calls fewer per poll: a poll's answer repeats).
        result = (
            exchange.kept((call.codec, op.name, body), MISSING)
            if status == 200 and len(body) <= MAX_BODY
            else MISSING
        )
        if result is MISSING:
            try:
                result = exchange.decode(call.codec, op, status, headers, body)
            except Exception:
                call.done(call.context, FirstAttempt(call.began, outcome))
                return  # decoded again, and raised, by the retry loop
        if logger.isEnabledFor(logging.DEBUG):  # log_attempt's test, without its call
            log_attempt(exchange.scrub, op, call.binding, status, call.began, 1, None)
        call.done(call.context, result)
        return
    call.done(call.context, FirstAttempt(call.began, outcome))
