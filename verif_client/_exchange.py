"""One call's exchange with the service: its attempts, until a result or a final failure.

The pipeline, step by step, and where each step lives:

1. admission and rate (``_admission.Admission``): the rate limit, then a
   connection slot; a 429's hold first (``_pacing.Pacing.hold``);
2. the attempt: the request written and its answer read by the sender
   (``_transport``), under the attempt's time limit (``time_limit``);
3. decode and masking (``_decoding.Decoder``): the typed result, or the
   error, with our secrets taken out;
4. the failure classified (``failure_of_send``, ``Exchange._refused``): a
   network error, a request that may have been delivered, an HTTP status;
   a 429 slows the whole client down (``_pacing.Pacing.refused``);
5. retry and deadline (``Exchange._pause``, with ``RetryPolicy``): whether,
   and after how long, to try again;
6. logging (``log_attempt``): one DEBUG line per attempt.

A new retry rule goes in ``RetryPolicy`` (``_retry.py``) when it is the
policy's to decide (which statuses, how long a pause), or in ``_pause`` and
the classification when it depends on the failure itself.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from ._admission import Admission
from ._clock import loop_clock, running_loop
from ._codec import Codec, HTTPRequest
from ._decoding import Decoder
from ._errors import (
    DeliveryUnknownError,
    HTTPStatusError,
    ProxyError,
    TransportError,
    VerifClientError,
)
from ._operations import Operation
from ._options import ClientOptions
from ._pacing import Pacing
from ._retry import ASKS_TO_WAIT, RetryPolicy, retry_after
from ._scrub import Scrubber
from ._service import Binding
from ._transport import FirstAttempt, Sender, SendError
from ._transport._pool import ConnectionPool
from ._transport._proxy import ProxyRefused

if TYPE_CHECKING:
    import httpx

    from . import _hooks

logger = logging.getLogger("verif_client")

R = TypeVar("R")


class Exchange:
    """The exchanges of one client: its connections, and the steps every call goes through.

    Its state belongs to the event loop it was last used on (``enter_loop``).
    """

    __slots__ = (
        "_open",
        "_proxy_shown",
        "_rng",
        "admission",
        "clock",
        "closed",
        "connections",
        "decode",
        "hooks",
        "kept",
        "max_response_bytes",
        "owner",
        "pacing",
        "scrub",
        "timeout",
    )

    def __init__(
        self,
        options: ClientOptions,
        hooks: _hooks.Dispatch | None,
        open_connections: Callable[[], Sender],
    ) -> None:
        # Not the options themselves: they hold the password, and this object
        # is reachable from a failure's traceback (tests/test_secrets_chain.py).
        # The client, which keeps them, opens the connections.
        self._open = open_connections
        chosen_proxy = options.chosen_proxy
        self._proxy_shown = chosen_proxy.shown if chosen_proxy is not None else None
        self.timeout = options.timeout
        self.max_response_bytes = options.max_response_bytes
        self.hooks = hooks
        self.scrub: Scrubber = options.scrub
        # Bound once: the decoder's method is called on every answer.
        decoder = Decoder(options.scrub)
        self.decode = decoder.decode
        # Its kept results, looked up before decode() by the calls at once.
        self.kept = decoder.kept
        self.admission = Admission(
            options.max_connections, options.rate_limit, options.rate_limiter, hooks
        )
        self.pacing = Pacing(self.admission, options.site, options.rate_limit, hooks)
        self.connections: Sender | None = None
        self.owner: object = None  # the event loop the clock and the admission belong to
        self.clock: Callable[[], float] | None = None
        self.closed = False
        self._rng = random.Random()

    async def aclose(self) -> None:
        """Close the connections; any later call raises ``RuntimeError``."""
        self.closed = True
        if self.connections is not None:
            connections, self.connections = self.connections, None
            await connections.aclose()

    def sender(self) -> Sender:
        """The connections, opened on first use."""
        if self.closed:
            raise RuntimeError("this VerificationClient is closed")
        if self.connections is None:
            self.connections = self._open()
        return self.connections

    def enter_loop(self) -> None:
        """Start afresh on the running event loop: the slots, the clock and our
        own rate limiter belonged to the loop this client was last used on
        (``asyncio.run`` twice), which may have died with slots taken."""
        self.owner = running_loop()
        # Looked up once per loop (see _clock); it only measures durations.
        self.clock = loop_clock()
        self.admission.reset()

    def time_limit(self, policy: RetryPolicy, spent: float) -> float:
        """An attempt's time: one deadline per attempt, and no attempt, the
        first included, outlives the call's deadline (``spent`` of it gone)."""
        return max(0.0, min(self.timeout, policy.deadline - spent))

    async def run(
        self,
        op: Operation[R],
        binding: Binding,
        codec: Codec,
        request: HTTPRequest,
        params: Mapping[str, object],
        policy: RetryPolicy,
        before_send: Callable[[], Awaitable[None]] | None,
        first: FirstAttempt | None = None,
    ) -> R:
        """One call, with its retries. What it raises is scrubbed of our
        secrets here, for every caller: network errors may quote what the
        peer sent, too. ``first``: the first attempt, made already (see
        _atonce): its answer or error is taken as that attempt's."""
        try:
            if running_loop() is not self.owner:
                self.enter_loop()
            clock = self.clock
            assert clock is not None
            started = clock() if first is None else first.began
            attempt = 0
            # A retried attempt is the same request, already recorded: the hook runs once.
            hook = _once(before_send) if before_send is not None else None
            failure: VerifClientError | None = None
            while True:
                attempt += 1
                # The clock is read once for the first attempt.
                began = started if attempt == 1 else clock()
                if first is None and self.pacing.slowdown is not None:
                    # Outside the try: its 429 is no answer to map or retry.
                    await self.pacing.hold(op, policy, started, clock)
                try:
                    if first is not None:
                        given, first = first, None
                        status, headers, body = given.answer()
                    else:
                        # Inline, not a coroutine of its own: one fewer per
                        # call, and no frame holding the request in a traceback.
                        sender = self.sender()
                        slots = self.admission.capacity()
                        if not self.admission.at_once(slots):
                            await self.admission.admit(slots)
                        try:
                            if hook is not None:
                                await hook()
                            status, headers, body = await sender.send(
                                request,
                                time_limit=self.time_limit(policy, began - started),
                                max_response_bytes=self.max_response_bytes,
                                operation=op.name,
                            )
                        finally:
                            slots.release()
                    result = self.decode(codec, op, status, headers, body)
                except SendError as exc:
                    failure, retryable = failure_of_send(exc, op, params)
                    log_attempt(self.scrub, op, binding, None, began, attempt, failure)
                except HTTPStatusError as exc:
                    # Raised by the decoding of an answer: status and headers are its.
                    failure, retryable = self._refused(exc, op, policy, status, headers, began)
                    log_attempt(self.scrub, op, binding, exc.status_code, began, attempt, exc)
                else:
                    log_attempt(self.scrub, op, binding, status, began, attempt, None)
                    return result
                pause = self._pause(policy, attempt, failure, retryable, started, clock)
                if pause is None:
                    raise failure
                await self._backoff(attempt, failure, began, pause)
        except VerifClientError as exc:
            self.scrub.error(exc)
            raise
        finally:
            # A failure's traceback holds this frame: kept in it, the two
            # would be a cycle, left to the collector's oldest generation.
            # Nor are the request (it holds the password) and the answer (it
            # may quote the request) left in it.
            failure = None
            del request
            body, headers = b"", ()

    def _refused(
        self,
        exc: HTTPStatusError,
        op: Operation[Any],
        policy: RetryPolicy,
        status: int,
        headers: Any,
        began: float,
    ) -> tuple[VerifClientError, bool]:
        """An HTTP status the service answered with: the failure, and whether to retry."""
        failure: VerifClientError = exc
        retryable = policy.retries_status(status, op.idempotent)
        if status in ASKS_TO_WAIT:
            exc.retry_after = retry_after(headers)
        if status == 429:
            self.pacing.refused(op, exc.retry_after, began, self.clock)
        proxy = self._proxy_shown
        if status == 407 and proxy is not None:
            # Plain HTTP through a proxy: its refusal comes as the
            # answer, and the request went no further.
            failure = ProxyError(
                f"ProxyError: {proxy} refused the request: "
                "407 (wrong or missing credentials in the proxy URL)",
                proxy=proxy,
                status_code=407,
                operation=op.name,
            )
            retryable = False
        return failure, retryable

    def _pause(
        self,
        policy: RetryPolicy,
        attempt: int,
        failure: VerifClientError,
        retryable: bool,
        started: float,
        clock: Callable[[], float],
    ) -> float | None:
        """How long to wait before the next attempt; None for no next attempt
        (the caller raises ``failure``: raised here, this frame would hold it,
        a cycle): not ``retryable``, the attempts spent, or a pause that
        would end past the call's deadline."""
        # A client closed while this call was in flight fails the call with
        # its transport error rather than retrying into a closed pool.
        if not retryable or attempt >= policy.attempts or self.closed:
            return None
        pause = policy.backoff(attempt, self._rng)
        asked = getattr(failure, "retry_after", None)
        if asked is not None:
            pause = asked
        if clock() + pause - started > policy.deadline:
            if asked is not None:
                assert isinstance(failure, HTTPStatusError)
                failure.beyond_deadline(policy.deadline)
            return None
        return pause

    def _backoff(
        self, attempt: int, failure: VerifClientError, began: float, pause: float
    ) -> Awaitable[None]:
        """The pause before the next attempt, told to the hooks if there are any."""
        if self.hooks is None:
            return anyio.sleep(pause)
        return self.hooks.backoff(attempt, failure, began, pause)


def failure_of_send(
    exc: SendError, op: Operation[Any], params: Mapping[str, object]
) -> tuple[VerifClientError, bool]:
    """A failed send as the error the caller gets, and whether it may be retried:
    only a request that provably never left, or one that may be repeated."""
    never_sent = exc.never_sent
    failure: VerifClientError
    if isinstance(exc, ProxyRefused):
        failure = ProxyError(
            str(exc),
            proxy=exc.proxy,
            status_code=exc.status_code,
            operation=op.name,
        )
    elif never_sent or op.idempotent:
        failure = TransportError(str(exc), operation=op.name)
    else:
        failure = DeliveryUnknownError(
            f"{exc}; the request may have reached the service, so it was not repeated",
            operation=op.name,
            phone_number=_phone_of(op, params),
        )
    return failure, never_sent or op.idempotent


def log_attempt(
    scrub: Scrubber,
    op: Operation[Any],
    binding: Binding,
    status: int | None,
    began: float,
    attempt: int,
    error: BaseException | None,
) -> None:
    """One DEBUG line per attempt (nothing built when DEBUG is off)."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "%s binding=%s status=%s attempt=%d duration_ms=%.1f%s",
            op.name,
            binding.value,
            status,
            attempt,
            (anyio.current_time() - began) * 1000,
            f" error={type(error).__name__}: {scrub.text(str(error))}" if error else "",
        )


def open_connections(options: ClientOptions) -> Sender:
    """The connections the options ask for: our own pool, the user's Transport, or httpx."""
    transport = options.transport
    if options.http_client is None and transport is None:
        return ConnectionPool(
            options.connect_url,
            verify=options.verify,
            cert=options.client_cert,
            trusted=options.trusted,
            proxy=options.chosen_proxy,
            max_idle=options.max_connections,
        )
    if transport is not None and not hasattr(transport, "handle_async_request"):
        # A verif_client.Transport (Simulator.transport(), say) is
        # driven as it is: no httpx objects on the path at all.
        return transport
    # httpx is loaded only for what the user brings.
    from ._transport._httpx import HttpxSender

    return HttpxSender(
        options.connect_url,
        http_client=options.http_client,
        transport=cast("httpx.AsyncBaseTransport | None", transport),
    )


def _once(hook: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    done = False

    async def run_once() -> None:
        nonlocal done
        if not done:
            done = True
            await hook()

    return run_once


def _phone_of(op: Operation[Any], params: Mapping[str, object]) -> str | None:
    name = op.phone_param
    phone = params.get(name) if name is not None else None
    return phone if isinstance(phone, str) else None
