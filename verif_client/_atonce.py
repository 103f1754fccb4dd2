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

import anyio

from ._answercache import MAX_BODY, MISSING
from ._codec import Codec, Credentials, HTTPRequest
from ._exchange import Exchange, log_attempt, logger
from ._operations import Operation
from ._retry import RetryPolicy
from ._service import Binding
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

    __slots__ = ("_at_once", "_client", "_codecs", "_credentials", "_exchange", "_requests")

    def __init__(
        self,
        exchange: Exchange,
        client: VerificationClient,
        codecs: Mapping[Binding, Codec],
        credentials: Credentials | None,
    ) -> None:
        self._exchange = exchange
        self._at_once = exchange.admission.at_once
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

    def start(
        self,
        op: Operation[Any],
        request_id: int,
        retry: RetryPolicy,
        cut_at: float,
        done: Callable[[Any, object], None],
        context: Any,
    ) -> PoolCallAtOnce | None:
        """Start a call; None (and nothing sent) if it cannot start at once.
        ``done(context, outcome)`` gets the result, a FirstAttempt, or None
        if the attempt was cut at ``cut_at``."""
        exchange = self._exchange
        pool = exchange.connections
        slots = exchange.admission.slots
        clock = exchange.clock
        if (
            exchange.closed
            or slots is None
            or clock is None
            or not isinstance(pool, ConnectionPool)
            or not self._at_once(slots)
        ):
            return None
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
                return None
        call = PoolCallAtOnce(exchange, binding, op, codec, slots, clock(), done, context)
        # exchange.time_limit(retry, 0.0), the same float, without its call.
        time_limit = min(exchange.timeout, retry.deadline - 0.0)
        attempt = pool.send_at_once(
            request,
            time_limit=time_limit if time_limit > 0.0 else 0.0,
            cut_at=cut_at,
            max_response_bytes=exchange.max_response_bytes,
            operation=op.name,
            done=_answered_at_once,
            context=call,
        )
        if attempt is None:
            slots.release()
            return None
        call.attempt = attempt
        return call

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
    """One call started by PoolCallsAtOnce."""

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

    def __init__(
        self,
        exchange: Exchange,
        binding: Binding,
        op: Operation[Any],
        codec: Codec,
        slots: anyio.Semaphore,
        began: float,
        done: Callable[[Any, object], None],
        context: Any,
    ) -> None:
        self.exchange = exchange
        self.binding = binding
        self.op = op
        self.codec = codec
        self.slots = slots
        self.began = began
        self.done = done
        self.context = context
        self.attempt: AttemptAtOnce | None = None

    def abandon(self) -> None:
        """The caller is gone: the attempt in flight, if any, ends unheard."""
        attempt = self.attempt
        if attempt is not None and not attempt.ended:
            attempt.abandon()
            self.slots.release()


def _answered_at_once(call: PoolCallAtOnce, outcome: Answer | Exception | None) -> None:
    call.slots.release()
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
