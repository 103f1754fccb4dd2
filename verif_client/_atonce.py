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

from collections.abc import Callable, Mapping
from typing import Any

import anyio

from ._codec import Codec, Credentials
from ._exchange import Exchange, log_attempt
from ._operations import Operation
from ._retry import RetryPolicy
from ._service import Binding
from ._transport import Answer, FirstAttempt
from ._transport._pool import AttemptAtOnce, ConnectionPool


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

    __slots__ = ("_at_once", "_binding", "_codec", "_credentials", "_exchange")

    def __init__(
        self, exchange: Exchange, binding: Binding, codec: Codec, credentials: Credentials | None
    ) -> None:
        # Bound once per poll run: the client's binding and codec for it.
        self._exchange = exchange
        self._at_once = exchange.admission.at_once
        self._binding = binding
        self._codec = codec
        self._credentials = credentials

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
        params: Mapping[str, object],
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
        codec = self._codec
        try:
            request = codec.encode(op, params, credentials=self._credentials)
        except Exception:
            # Encoded again by the call that takes it, and raised there.
            slots.release()
            return None
        call = PoolCallAtOnce(exchange, self._binding, op, codec, slots, clock(), done, context)
        attempt = pool.send_at_once(
            request,
            time_limit=exchange.time_limit(retry, 0.0),
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
        try:
            result = exchange.decode(call.codec, call.op, status, headers, body)
        except Exception:
            pass  # decoded again, and raised, by the retry loop
        else:
            log_attempt(exchange.scrub, call.op, call.binding, status, call.began, 1, None)
            call.done(call.context, result)
            return
    call.done(call.context, FirstAttempt(call.began, outcome))
