"""The async client: the codecs behind one connection layer (see _transport)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from ._codec import DEFAULT_MAX_RESPONSE_BYTES, Codec
from ._exchange import Exchange, open_connections
from ._operations import (
    Operation,
    get_operation,
)
from ._options import DEFAULT_MAX_CONNECTIONS, ClientOptions
from ._poll_methods import RequestIds, _PollMethods
from ._pollpolicy import DEFAULT_POLL_POLICY, PollPolicy, VerifiedDialect
from ._ratelimit import Limiter
from ._retry import DEFAULT_RETRY, RetryPolicy
from ._service import DEFAULT_NAMESPACE, ENDPOINT_PATH, Binding, parse_binding
from ._transport import FirstAttempt, Sender, Transport
from ._transport._tls import CertTypes
from ._typed_calls import _TypedCalls

if TYPE_CHECKING:
    import httpx

    from . import _hooks
    from ._atonce import PoolCallsAtOnce
    from ._polling import (
        Outcome,
        PollKind,
        PollStream,
    )

logger = logging.getLogger("verif_client")

R = TypeVar("R")
_O = TypeVar("_O", bound="Outcome")


class VerificationClient(_TypedCalls, _PollMethods):
    """Async client for the six operations, in any of the four bindings.

    The constructor does no network I/O (it reads the proxy variables of the
    environment, and checks ``cert=`` loads); the connection pool opens on first use and
    closes with ``aclose()`` or the ``async with`` block (an injected
    ``http_client`` is left open: it is the caller's). The documentation's
    "The client and its options" page has the options table and the retry rules.

    Args:
        base_url: The service's site, e.g. ``SANDBOX_BASE_URL``; ``endpoint_path``
            is appended (the full endpoint address is accepted as is).
        username: The SOAP AuthenticationHeader's ApiUsername (never sent on
            HTTP GET/POST).
        password: Its ApiPassword: never in reprs, logs or errors, and scrubbed
            from anything the service echoes.
        binding: ``Binding.SOAP11`` (default), ``SOAP12``, ``HTTP_GET``,
            ``HTTP_POST``, or their values (``"soap12"``, ...).
        namespace: The service namespace.
        endpoint_path: The ASMX endpoint's path under ``base_url``.
        timeout: Seconds one HTTP attempt may take in all (connect, write, the
            whole answer).
        max_connections: Pool size, and the cap on requests in flight.
        retry: When to try a failed call again (``NO_RETRY`` turns it off).
        rate_limit: Requests per second for everything this client sends.
        rate_limiter: Instead of ``rate_limit``: any ``Limiter`` (an object
            with ``async acquire()``), e.g. one shared by several processes.
        max_response_bytes: Answers larger than this are refused
            (``ResponseTooLargeError``).
        validate: Check the service's rules before sending (types and XML
            characters are always checked).
        verify: TLS verification: ``True``, an ``ssl.SSLContext``, or an
            explicit ``False`` (logged as a warning).
        http_client: An ``httpx.AsyncClient`` of yours to send with (not closed
            by the client).
        transport: A ``Transport`` (e.g. ``Simulator.transport()``) or an httpx
            async transport to send with; closed with the client.
        hooks: A ``Hooks`` object, or several, told of every call and poll.
        username_is_secret: Scrub the username too, and hide it from the repr.

    Raises:
        ValueError: Contradictory options (``rate_limit`` and ``rate_limiter``,
            ``http_client`` and ``transport``), ``max_connections < 1``, or a
            ``base_url`` that is not a site's address.

    Example:
        ```python
        async with VerificationClient(SANDBOX_BASE_URL, username="u", password="p") as client:
            sent = await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
            outcome = await client.wait_until_verified(sent.request_id)
        ```
    """

    def __init__(
        self,
        base_url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        binding: Binding | str = Binding.SOAP11,
        namespace: str = DEFAULT_NAMESPACE,
        endpoint_path: str = ENDPOINT_PATH,
        timeout: float = 30.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        retry: RetryPolicy = DEFAULT_RETRY,
        rate_limit: float | None = None,
        rate_limiter: Limiter | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        validate: bool = True,
        verify: bool | ssl.SSLContext = True,
        cert: CertTypes | None = None,
        proxy: str | None = None,
        trust_env: bool = True,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | Transport | None = None,
        hooks: _hooks.Hooks | Sequence[_hooks.Hooks] | None = None,
        username_is_secret: bool = False,
    ) -> None:
        # Every option is checked there, once, and what follows from them worked out.
        options = ClientOptions(
            base_url=base_url,
            username=username,
            password=password,
            binding=binding,
            namespace=namespace,
            endpoint_path=endpoint_path,
            timeout=timeout,
            max_connections=max_connections,
            retry=retry,
            rate_limit=rate_limit,
            rate_limiter=rate_limiter,
            max_response_bytes=max_response_bytes,
            validate=validate,
            verify=verify,
            cert=cert,
            proxy=proxy,
            trust_env=trust_env,
            http_client=http_client,
            transport=transport,
            hooks=hooks,
            username_is_secret=username_is_secret,
        )
        self._options = options
        self.base_url = options.site
        self.binding = options.chosen_binding
        self.namespace = namespace
        self.timeout = timeout
        self.max_connections = max_connections
        self.retry = retry
        self.rate_limit = rate_limit
        self.max_response_bytes = max_response_bytes
        self._credentials = options.credentials
        self._proxy = options.chosen_proxy
        self._cert = options.client_cert
        self._codecs = options.codecs()
        if verify is False:
            logger.warning("TLS certificate verification is OFF for %s", self.base_url)
        self._hooks: _hooks.Dispatch | None = None
        if hooks is not None:
            # Hooks, their events and the poll machinery they report on are
            # imported only when used (docs/performance.md: start-up).
            from . import _hooks

            self._hooks = _hooks.dispatch(hooks, self.base_url)
        # The pipeline every call goes through (see _exchange); its run bound
        # once, as the hot path calls it.
        self._exchange = Exchange(options, self._hooks, self._open_connections)
        self._run = self._exchange.run
        # What the service has shown of its Verified dialect (see PollPolicy.false_means).
        self._verified_dialect = VerifiedDialect()

    def __repr__(self) -> str:
        user = self._credentials.username if self._credentials else None
        if user and self._options.username_is_secret:
            user = "***"
        return (
            f"<VerificationClient {self.base_url} binding={self.binding.value} username={user!r}>"
        )

    def codec(self, binding: Binding | str | None = None) -> Codec:
        """The sans-IO codec this client sends with (its binding's, by default),
        built with this client's options: to check requests ahead of time."""
        return self._codecs[self.binding if binding is None else parse_binding(binding)]

    # -- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (and a ``transport=`` given); the ``async
        with`` block does it on leaving.

        Calls still in flight fail with their transport error; any later call
        raises ``RuntimeError``. An ``http_client=`` of yours is left open.
        Closing twice is harmless.
        """
        await self._exchange.aclose()

    def _open_connections(self) -> Sender:
        # Here, not in the Exchange: the client keeps the options and their secrets.
        return open_connections(self._options)

    @property
    def _connections(self) -> Sender | None:
        """The connections, once opened (tests look at the pool)."""
        return self._exchange.connections

    @overload
    async def call(
        self, operation: Operation[R], *, binding: Binding | str | None = None, **params: Any
    ) -> R: ...
    @overload
    async def call(
        self, operation: str, *, binding: Binding | str | None = None, **params: Any
    ) -> object: ...
    async def call(
        self,
        operation: str | Operation[Any],
        *,
        binding: Binding | str | None = None,
        **params: Any,
    ) -> object:
        """Call any operation with wire-named parameters: by its constant
        (``HAS_BEEN_VERIFIED``, typed with its result) or its wire name
        (case-insensitive, typed ``object``).

        Args:
            operation: An ``Operation`` constant or an operation's wire name.
            binding: This call's binding, instead of the client's.
            **params: The parameters by their wire names (``RequestId=...``).

        Returns:
            The operation's result, as its method returns it.

        Raises:
            RequestValidationError: A parameter breaks a rule, or no operation
                has that name; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered with no result: a
                ``SoapFault``, an ``AuthenticationError``, an
                ``HTTPStatusError``, a ``DecodeError``, a
                ``ResponseTooLargeError``.
            DeliveryUnknownError: A non-repeatable operation may have reached
                the service.

        Example:
            ```python
            result = await client.call(HAS_BEEN_VERIFIED, RequestId=4294967297)
            print(result.verified)
            ```
        """
        return await self.call_with(operation, params, binding=binding)

    @overload
    async def call_with(
        self,
        operation: Operation[R],
        params: Mapping[str, object],
        *,
        binding: Binding | str | None = None,
        retry: RetryPolicy | None = None,
        before_send: Callable[[], Awaitable[None]] | None = None,
    ) -> R: ...
    @overload
    async def call_with(
        self,
        operation: str,
        params: Mapping[str, object],
        *,
        binding: Binding | str | None = None,
        retry: RetryPolicy | None = None,
        before_send: Callable[[], Awaitable[None]] | None = None,
    ) -> object: ...
    async def call_with(
        self,
        operation: str | Operation[Any],
        params: Mapping[str, object],
        *,
        binding: Binding | str | None = None,
        retry: RetryPolicy | None = None,
        before_send: Callable[[], Awaitable[None]] | None = None,
    ) -> object:
        """Like :meth:`call`, with the parameters as a mapping and an optional
        retry policy for this call only.

        ``before_send`` is awaited once, when the rate limit and a connection
        slot have been granted and the request is about to be written: the
        moment to record "in flight" in a journal. If it raises, nothing is sent.

        Args:
            operation: An ``Operation`` constant or an operation's wire name.
            params: The parameters by their wire names.
            binding: This call's binding, instead of the client's.
            retry: This call's retry policy, instead of the client's.
            before_send: Awaited just before the request is written.

        Returns:
            The operation's result.

        Raises:
            RequestValidationError: A parameter breaks a rule, or no operation
                has that name; nothing was sent.
            TransportError: The network failed (``DeliveryUnknownError``: a
                non-repeatable request may have reached the service).
            ResponseError: The service answered with no result.
        """
        op = get_operation(operation)
        chosen = self.binding if binding is None else parse_binding(binding)
        return await self._call(op, chosen, params, retry or self.retry, before_send)

    def _call(
        self,
        op: Operation[Any],
        binding: Binding,
        params: Mapping[str, object],
        retry: RetryPolicy,
        before_send: Callable[[], Awaitable[None]] | None = None,
        first: FirstAttempt | None = None,
    ) -> Awaitable[Any]:
        """The call's request encoded (a bad parameter raises here), and its
        exchange to await: a plain function, so that the caller awaits the
        exchange itself, one coroutine fewer per call (see _polled_call)."""
        codec = self._codecs[binding]
        request = codec.encode(op, params, credentials=self._credentials)
        exchange = self._run(op, binding, codec, request, params, retry, before_send, first)
        return exchange if self._hooks is None else self._hooks.call(op.name, binding, exchange)

    def _polled_call(
        self,
        operation: Operation[Any],
        params: Mapping[str, object],
        *,
        retry: RetryPolicy,
        first: FirstAttempt | None = None,
    ) -> Awaitable[object]:
        """How the poller calls: ``call_with`` without a coroutine of its own.
        A poll in flight holds its whole chain of coroutines while it waits,
        and the garbage collector walks every one: a link less per poll is
        one object less per connection for it to walk, and one less to make.
        ``first``: the call's first attempt, already made (see _atonce)."""
        return self._call(operation, self.binding, params, retry, None, first)

    def _poll(
        self,
        kinds: tuple[PollKind[_O], ...],
        request_ids: RequestIds,
        *,
        policy: PollPolicy = DEFAULT_POLL_POLICY,
        max_concurrency: int = 100,
        keep_open: bool = False,
    ) -> AbstractAsyncContextManager[PollStream[_O]]:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
        from ._pollrun import poll

        return poll(
            self._polled_call,
            request_ids,
            kinds,
            policy=policy,
            # A worker beyond the connection slots could only wait for one: it
            # would add queueing, not throughput.
            workers=min(max_concurrency, self.max_connections),
            keep_open=keep_open,
            hooks=self._hooks,
            dialect=self._verified_dialect,
            at_once=self._calls_at_once(),
        )

    def _calls_at_once(self) -> PoolCallsAtOnce | None:
        """Only our own pool makes calls at once. Hooks see each call as an
        awaitable of its own: with them, every poll is awaited by its worker."""
        if not self._options.own_pool or self._hooks is not None:
            return None
        # Imported with the poller, which alone uses it (docs/performance.md: start-up).
        from ._atonce import PoolCallsAtOnce

        return PoolCallsAtOnce(self._exchange, self, self._codecs, self._credentials)

    @property
    def slowed_to(self) -> float | None:
        """Requests per second this client is held to after the service answered
        429 (see docs/client.md, Retries), or None when it goes at its own pace."""
        return self._exchange.pacing.slowed_to
