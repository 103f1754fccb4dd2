"""The async client: the codecs behind one connection layer (see _transport)."""

from __future__ import annotations

import base64
import logging
import random
import ssl
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar, Unpack, cast, overload
from urllib.parse import unquote, urlsplit

import anyio

from ._answercache import MAX_BODY, MISSING, AnswerCache, Key
from ._bindings import codec_for
from ._clock import loop_clock, running_loop
from ._codec import DEFAULT_MAX_RESPONSE_BYTES, Codec, Credentials, HTTPRequest
from ._errors import (
    DeliveryUnknownError,
    HTTPStatusError,
    ProxyError,
    TransportError,
    VerifClientError,
)
from ._operations import (
    GET_MOBILE_CONSENT_TEXT,
    GET_MOBILE_LOCATION,
    HAS_BEEN_VERIFIED,
    REVOKE_MOBILE_CONSENT,
    SEND_CONFIRMATION_SMS,
    UPDATE_BAD_CHECK_REJECT_REASON,
    Operation,
    get_operation,
)
from ._pollpolicy import DEFAULT_POLL_POLICY, PollPolicy, VerifiedDialect
from ._ratelimit import Limiter, RateLimiter
from ._results import LocationResult, RequestResult, VerificationResult
from ._retry import ASKS_TO_WAIT, DEFAULT_RETRY, RetryPolicy, retry_after
from ._scrub import NO_SECRETS, Scrubber
from ._service import (
    DEFAULT_NAMESPACE,
    ENDPOINT_PATH,
    SANDBOX_BASE_URL,
    Binding,
    parse_binding,
)
from ._transport import Answer, FirstAttempt, Sender, SendError, Transport
from ._transport._pool import AttemptAtOnce, ConnectionPool
from ._transport._proxy import Proxy, ProxyRefused, choose_proxy
from ._transport._spliced import IdRequests
from ._transport._tls import CertTypes, ClientCert, trusted_from_environment

if TYPE_CHECKING:
    import httpx

    from . import _hooks
    from ._polling import (
        LocationOutcome,
        Outcome,
        PollKind,
        PollRunOptions,
        PollStream,
        VerificationOutcome,
    )
    from ._slowdown import Slowdown

# The pool's cost per request does not grow with its size (docs/performance.md:
# CPU per request is flat from 16 to 1,024 connections), so the default is set
# by latency instead: 100 connections, like poll_verifications' default
# max_concurrency, carry the ~700 polls/s that 10,000 waiting ids need up to a
# service latency of about 140 ms. Idle connections expire after 5 s.
DEFAULT_MAX_CONNECTIONS: Final = 100

logger = logging.getLogger("verif_client")

R = TypeVar("R")
_O = TypeVar("_O", bound="Outcome")
RequestIds = Iterable[int] | AsyncIterable[int]


class VerificationClient:
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
        _check_number("timeout", timeout)
        _check_number("max_connections", max_connections, integer=True)
        _check_number("max_response_bytes", max_response_bytes, integer=True)
        if rate_limit is not None:
            _check_number("rate_limit", rate_limit)
        if rate_limit is not None and rate_limiter is not None:
            raise ValueError("pass either rate_limit or rate_limiter, not both")
        if http_client is not None and transport is not None:
            raise ValueError("pass either http_client or transport, not both")
        own_pool = http_client is None and transport is None
        if not own_pool and (proxy is not None or cert is not None):
            raise ValueError(
                "proxy= and cert= configure the client's own connection pool: give them to "
                "the http_client or transport you pass instead"
            )
        # The address shown (repr, base_url, warnings, hooks) never has the
        # credentials a URL may carry; only the connection layer gets them.
        shown, userinfo = _split_userinfo(str(base_url))
        self.base_url = _site_root(shown, endpoint_path)
        self._connect_url = self.base_url
        if userinfo is not None:
            scheme, _, rest = self.base_url.partition("://")
            self._connect_url = f"{scheme}://{userinfo}@{rest}"
        self.binding = parse_binding(binding)
        self.namespace = namespace
        self.timeout = timeout
        self.max_connections = max_connections
        self.retry = retry
        self.rate_limit = rate_limit
        self.max_response_bytes = max_response_bytes
        self._credentials = (
            Credentials(username or "", password or "")
            if username is not None or password is not None
            else None
        )
        self._username_is_secret = username_is_secret
        # Read at construction, as httpx does (see _transport._proxy); a
        # client you bring reads its own.
        self._proxy: Proxy | None = (
            choose_proxy(self.base_url, proxy, trust_env=trust_env) if own_pool else None
        )
        self._cert = ClientCert(cert) if cert is not None else None
        self._trusted = trusted_from_environment() if trust_env and verify is True else (None, None)
        secrets = [
            password or "",
            (username or "") if username_is_secret else "",
            *(self._proxy.secrets if self._proxy is not None else ()),
            (self._cert.password or "") if self._cert is not None else "",
        ]
        if userinfo is not None:
            # An echo of the Authorization header holds the Basic token.
            url_user, _, url_password = (unquote(part) for part in userinfo.partition(":"))
            token = base64.b64encode(f"{url_user}:{url_password}".encode()).decode("ascii")
            secrets += [url_password, token]
        self._scrub = Scrubber(secrets) if any(secrets) else NO_SECRETS
        self._answers = AnswerCache()
        self._codecs: dict[Binding, Codec] = {
            b: codec_for(
                b,
                namespace=namespace,
                endpoint_path=endpoint_path,
                validate=validate,
                max_response_bytes=max_response_bytes,
            )
            for b in Binding
        }
        self._verify = verify
        if verify is False:
            logger.warning("TLS certificate verification is OFF for %s", self.base_url)
        self._transport = transport
        self._http = http_client
        # Calls go through our ConnectionPool (see _sender).
        self._own_pool = transport is None and http_client is None
        self._connections: Sender | None = None
        self._limiter: anyio.Semaphore | None = None
        self._owner: object = None  # the event loop the next three belong to
        self._clock: Callable[[], float] | None = None
        self._rate: Limiter | None = rate_limiter
        # In front of _rate after a 429, until the pace has climbed back.
        self._slowdown: Slowdown | None = None
        self._rng = random.Random()
        self._closed = False
        self._hooks: _hooks.Dispatch | None = None
        if hooks is not None:
            # Hooks, their events and the poll machinery they report on are
            # imported only when used (docs/performance.md: start-up).
            from . import _hooks

            self._hooks = _hooks.dispatch(hooks, self.base_url)
        # What the service has shown of its Verified dialect (see PollPolicy.false_means).
        self._verified_dialect = VerifiedDialect()

    def __repr__(self) -> str:
        user = self._credentials.username if self._credentials else None
        if user and self._username_is_secret:
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
        self._closed = True
        if self._connections is not None:
            connections, self._connections = self._connections, None
            await connections.aclose()

    def _sender(self) -> Sender:
        if self._closed:
            raise RuntimeError("this VerificationClient is closed")
        if self._connections is None:
            transport = self._transport
            if self._http is None and transport is None:
                self._connections = ConnectionPool(
                    self._connect_url,
                    verify=self._verify,
                    cert=self._cert,
                    trusted=self._trusted,
                    proxy=self._proxy,
                    max_idle=self.max_connections,
                )
            elif transport is not None and not hasattr(transport, "handle_async_request"):
                # A verif_client.Transport (Simulator.transport(), say) is
                # driven as it is: no httpx objects on the path at all.
                self._connections = transport
            else:
                # httpx is loaded only for what the user brings.
                from ._transport._httpx import HttpxSender

                self._connections = HttpxSender(
                    self._connect_url,
                    http_client=self._http,
                    transport=cast("httpx.AsyncBaseTransport | None", transport),
                )
        return self._connections

    def _enter_loop(self) -> None:
        """Start afresh on the running event loop: the slots, the clock and our
        own rate limiter belonged to the loop this client was last used on
        (``asyncio.run`` twice), which may have died with slots taken."""
        self._owner = running_loop()
        # Looked up once per loop (see _clock); it only measures durations.
        self._clock = loop_clock()
        self._limiter = None
        if self.rate_limit is not None:
            self._rate = None

    def _capacity(self) -> anyio.Semaphore:
        # Created on first use: anyio primitives belong to the running event
        # loop. A semaphore, not a CapacityLimiter: the limiter looks the
        # current task up on every acquire and release, which on Python 3.11
        # costs a system call (see _clock), and slots need no owner.
        if self._limiter is None:
            self._limiter = anyio.Semaphore(self.max_connections)
        return self._limiter

    # -- the six operations --------------------------------------------------

    async def send_confirmation_sms(
        self, phone_number: str, question: str, *, binding: Binding | str | None = None
    ) -> RequestResult:
        """Text ``question`` (a yes/no question) to ``phone_number``
        (SecureLink_Confirmation_SendRequestViaSms).

        Never retried once the request may have left: a second SMS is a real
        harm. Poll the answer with :meth:`has_been_verified` or
        :meth:`wait_until_verified`.

        Args:
            phone_number: 7 to 15 ASCII digits.
            question: The question, 1 to 200 UTF-16 code units.
            binding: This call's binding, instead of the client's.

        Returns:
            The ``request_id`` to poll (``error_message`` when the service
            refused the request).

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
            DeliveryUnknownError: The request may have reached the service: it
                is not sent again; the error names the number.
        """
        params = SEND_CONFIRMATION_SMS.wire_params(phone_number, question)
        return await self.call_with(SEND_CONFIRMATION_SMS, params, binding=binding)

    async def has_been_verified(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> VerificationResult:
        """Whether the owner confirmed (SecureLink_SecurityCode_HasBeenVerified).

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            binding: This call's binding, instead of the client's.

        Returns:
            ``verified``: ``True``, ``False``, or ``None`` while nobody answered
            (a service of the plain-``bool`` shape says ``False`` until then:
            see ``PollPolicy.false_means``).

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
        """
        params = HAS_BEEN_VERIFIED.wire_params(request_id)
        result = await self.call_with(HAS_BEEN_VERIFIED, params, binding=binding)
        self._verified_dialect.learn(result)
        return result

    async def get_mobile_location(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> LocationResult:
        """The location the owner shared (SecureLink_MobileLocation_GetResult).

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            binding: This call's binding, instead of the client's.

        Returns:
            ``location`` (a ``Location``), or ``None`` until the owner shares it
            (``error_message`` says why).

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
        """
        params = GET_MOBILE_LOCATION.wire_params(request_id)
        return await self.call_with(GET_MOBILE_LOCATION, params, binding=binding)

    async def revoke_mobile_consent(
        self, mobile_number: str, *, binding: Binding | str | None = None
    ) -> bool:
        """Revoke the consent recorded for a mobile number (RevokeMobileConsent).

        Never retried once the request may have left.

        Args:
            mobile_number: The number, 7 to 15 ASCII digits.
            binding: This call's binding, instead of the client's.

        Returns:
            Whether consent existed and was revoked (``False``: there was none).

        Raises:
            DeliveryUnknownError: The revocation may have reached the service:
                it is not sent again.
            TransportError: Any other network failure, after the retries.
            RequestValidationError: Not 7 to 15 ASCII digits; nothing was sent.
            ResponseError: The service answered, with no result.
        """
        params = REVOKE_MOBILE_CONSENT.wire_params(mobile_number)
        return await self.call_with(REVOKE_MOBILE_CONSENT, params, binding=binding)

    async def get_mobile_consent_text(self, *, binding: Binding | str | None = None) -> str:
        """The consent text a number's owner must agree to (GetMobileConsentText).

        Args:
            binding: This call's binding, instead of the client's.

        Returns:
            The text; a null text reads as ``""``.

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
        """
        return await self.call_with(GET_MOBILE_CONSENT_TEXT, {}, binding=binding)

    async def update_bad_check_reject_reason(
        self, bad_check_id: int, reject_reason: str, *, binding: Binding | str | None = None
    ) -> bool:
        """Set the reject reason of a bad-check item
        (UpdatePrivateBadCheckRejectReason).

        Never retried once the request may have left.

        Args:
            bad_check_id: The item's id (a 64-bit integer).
            reject_reason: The CheckRejectReason to record, e.g. ``"NSF"``.
            binding: This call's binding, instead of the client's.

        Returns:
            Whether the service updated the item.

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
            DeliveryUnknownError: The request may have reached the service; it
                is not sent again.
        """
        params = UPDATE_BAD_CHECK_REJECT_REASON.wire_params(bad_check_id, reject_reason)
        return await self.call_with(UPDATE_BAD_CHECK_REJECT_REASON, params, binding=binding)

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
        exchange = self._exchange(op, binding, codec, request, params, retry, before_send, first)
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
        ``first``: the call's first attempt, already made (see _CallsAtOnce)."""
        return self._call(operation, self.binding, params, retry, None, first)

    def _decode(
        self,
        codec: Codec,
        op: Operation[R],
        status: int,
        headers: Sequence[tuple[str, str]],
        body: bytes,
    ) -> R:
        """Decode an answer; our secrets are taken out of what it tells us (see _scrub).

        The body itself is decoded as it came: masking inside the XML could break
        its structure or change its data. Only a failure is decoded again from a
        masked body, because its texts quote the body cut to a length, and a cut
        could keep half of a secret."""
        key: Key | None = None
        if status == 200 and len(body) <= MAX_BODY:
            key = (codec, op.name, body)
            kept = self._answers.get(key)
            if kept is not MISSING:
                return kept  # type: ignore[return-value]
        scrub = self._scrub
        try:
            result = codec.decode(op, status, headers, body)
        except VerifClientError as exc:
            if not scrub:
                raise
            # Decoded again from a masked body, here and not in a method of
            # its own: the failure's traceback keeps the frame that decoded
            # it, and that frame's callers (f_back), with their locals as
            # they left them. This one's are cleared below; a method's would
            # keep the unmasked failure and body (and the failure: a cycle).
            failure = _redecoded(codec, op, status, headers, scrub.body(body))
            if failure is None:
                # The masked body decodes: the failure is the unmasked body's
                # own, and the frames of its traceback hold that body.
                failure = exc.with_traceback(None)
            scrub.error(failure)
        else:
            if scrub:
                result = scrub.result(result)
            if key is not None:
                self._answers.put(key, result)
            return result
        # The failure's traceback keeps this frame: the answer, which may
        # quote our request, is not left in its locals.
        del body, headers, key
        # Raised out of the except block, so that the unmasked failure is not
        # its __context__; and not kept, since its traceback holds this frame:
        # the two would make a cycle that keeps the whole call alive until the
        # collector's oldest generation finds it.
        try:
            raise failure from None
        finally:
            del failure

    # -- polling -------------------------------------------------------------

    async def wait_until_verified(
        self, request_id: int, *, policy: PollPolicy = DEFAULT_POLL_POLICY
    ) -> VerificationOutcome:
        """Poll HasBeenVerified for one id until it settles.

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            policy: When to ask again and for how long.

        Returns:
            The outcome: ``status`` ``VERIFIED``, ``DECLINED``, ``FAILED`` or
            ``TIMED_OUT``, the last answer, the error when it failed, the
            polls made. Failures are outcomes, not exceptions.
        """
        from ._polling import VERIFICATION

        return await self._wait_one(VERIFICATION, request_id, policy)

    async def wait_for_location(
        self, request_id: int, *, policy: PollPolicy = DEFAULT_POLL_POLICY
    ) -> LocationOutcome:
        """Poll MobileLocation_GetResult for one id until it settles.

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            policy: When to ask again and for how long.

        Returns:
            The outcome: ``status`` ``LOCATED``, ``FAILED`` or ``TIMED_OUT``
            (a denied location looks pending, so it times out).
        """
        from ._polling import LOCATION

        return await self._wait_one(LOCATION, request_id, policy)

    async def _wait_one(self, kind: PollKind[_O], request_id: int, policy: PollPolicy) -> _O:
        async with self._poll((kind,), [request_id], policy=policy, max_concurrency=1) as outcomes:
            async for outcome in outcomes:
                return outcome
        raise AssertionError("a poll run ended without an outcome")  # pragma: no cover

    def poll_verifications(
        self, request_ids: RequestIds = (), **options: Unpack[PollRunOptions]
    ) -> AbstractAsyncContextManager[PollStream[VerificationOutcome]]:
        """Poll HasBeenVerified for many ids; ``async with`` it and iterate the
        outcomes as they settle. ``request_ids`` may be an async iterable (a
        queue): the run then lasts until it ends. Options: ``policy``
        (``PollPolicy()``), ``max_concurrency`` (100 calls in flight at most)
        and ``keep_open`` (False; True keeps the input open for ``add()`` until
        ``close_input()``). Leaving the ``async with`` early cancels every
        request in flight.

        Example:
            ```python
            async with client.poll_verifications(request_ids) as outcomes:
                async for outcome in outcomes:  # each id exactly once
                    print(outcome.request_id, outcome.status)
            ```
        """
        from ._polling import VERIFICATION

        return self._poll((VERIFICATION,), request_ids, **options)

    def poll_locations(
        self, request_ids: RequestIds = (), **options: Unpack[PollRunOptions]
    ) -> AbstractAsyncContextManager[PollStream[LocationOutcome]]:
        """Like :meth:`poll_verifications`, for MobileLocation_GetResult."""
        from ._polling import LOCATION

        return self._poll((LOCATION,), request_ids, **options)

    def poll_verifications_and_locations(
        self, request_ids: RequestIds = (), **options: Unpack[PollRunOptions]
    ) -> AbstractAsyncContextManager[PollStream[Outcome]]:
        """Watch both for the same ids: one VerificationOutcome and one
        LocationOutcome per id, each as it settles."""
        from ._polling import BOTH

        return self._poll(BOTH, request_ids, **options)

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
        from ._polling import poll

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
            # Only our own pool makes calls at once. Hooks see each call as an
            # awaitable of its own: with them, every poll is awaited by its worker.
            at_once=_CallsAtOnce(self) if self._own_pool and self._hooks is None else None,
        )

    # -- the exchange, with retries -----------------------------------------

    async def _exchange(
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
        _CallsAtOnce): its answer or error is taken as that attempt's."""
        try:
            if running_loop() is not self._owner:
                self._enter_loop()
            clock = self._clock
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
                time_limit = self._time_limit(policy, began - started)
                if first is None and self._slowdown is not None:
                    await self._held(op, policy, started)
                try:
                    if first is not None:
                        given, first = first, None
                        status, headers, body = given.answer()
                    else:
                        sender = self._sender()
                        limiter = self._capacity()
                        if not self._admitted_at_once(limiter):
                            await self._admit(limiter)
                        try:
                            if hook is not None:
                                await hook()
                            status, headers, body = await sender.send(
                                request,
                                time_limit=time_limit,
                                max_response_bytes=self.max_response_bytes,
                                operation=op.name,
                            )
                        finally:
                            limiter.release()
                    result = self._decode(codec, op, status, headers, body)
                except SendError as exc:
                    never_sent = exc.never_sent
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
                            f"{exc}; the request may have reached the service,"
                            " so it was not repeated",
                            operation=op.name,
                            phone_number=_phone_of(op, params),
                        )
                    retryable = never_sent or op.idempotent
                    self._log(op, binding, None, began, attempt, failure)
                except HTTPStatusError as exc:
                    failure = exc
                    # Raised by the decoding of an answer: status and headers are its.
                    retryable = policy.retries_status(status, op.idempotent)
                    if status in ASKS_TO_WAIT:
                        exc.retry_after = retry_after(headers)
                    if status == 429:
                        self._slow_down(op, exc.retry_after, began)
                    if status == 407 and self._proxy is not None:
                        # Plain HTTP through a proxy: its refusal comes as the
                        # answer, and the request went no further.
                        failure = ProxyError(
                            f"ProxyError: {self._proxy.shown} refused the request: "
                            "407 (wrong or missing credentials in the proxy URL)",
                            proxy=self._proxy.shown,
                            status_code=407,
                            operation=op.name,
                        )
                        retryable = False
                    self._log(op, binding, exc.status_code, began, attempt, exc)
                else:
                    self._log(op, binding, status, began, attempt, None)
                    return result
                # A client closed while this call was in flight fails the call with
                # its transport error rather than retrying into a closed pool.
                if not retryable or attempt >= policy.attempts or self._closed:
                    raise failure
                pause = policy.backoff(attempt, self._rng)
                asked = getattr(failure, "retry_after", None)
                if asked is not None:
                    pause = asked
                if clock() + pause - started > policy.deadline:
                    if asked is not None:
                        assert isinstance(failure, HTTPStatusError)
                        failure.beyond_deadline(policy.deadline)
                    raise failure
                await (
                    anyio.sleep(pause)
                    if self._hooks is None
                    else self._hooks.backoff(attempt, failure, began, pause)
                )
        except VerifClientError as exc:
            self._scrub.error(exc)
            raise
        finally:
            # A failure's traceback holds this frame: kept in it, the two
            # would be a cycle, left to the collector's oldest generation.
            # Nor are the request (it holds the password) and the answer (it
            # may quote the request) left in it.
            failure = None
            del request
            body = b""
            headers = ()

    async def _held(self, op: Operation[Any], policy: RetryPolicy, started: float) -> None:
        """A 429's Retry-After holds every request of this client until it has
        passed (see _slowdown). A call waits that out only while its deadline
        allows; a hold that ends later (a Retry-After of 999999999) would make
        it a call that never ends: it then fails at its deadline, not sent,
        with the 429 that holds it (a bulk job sends the row again, a poll run
        asks again later, as after any 429)."""
        slowdown = self._slowdown
        clock = self._clock
        assert slowdown is not None
        assert clock is not None
        end = started + policy.deadline
        if slowdown.resume_at <= end:
            return
        await anyio.sleep(max(0.0, end - clock()))
        error = HTTPStatusError(429, "", operation=op.name)
        error.retry_after = max(0.0, slowdown.resume_at - clock())
        error.message += (
            f": not sent: the service asked (429, Retry-After) that nothing be sent for "
            f"{error.retry_after:g} s more, past the call's retry deadline of {policy.deadline:g} s"
        )
        error.args = (error.message,)
        raise error

    def _time_limit(self, policy: RetryPolicy, spent: float) -> float:
        """An attempt's time: one deadline per attempt, and no attempt, the
        first included, outlives the call's deadline (``spent`` of it gone)."""
        return max(0.0, min(self.timeout, policy.deadline - spent))

    def _admitted_at_once(self, limiter: anyio.Semaphore) -> bool:
        """Take a connection slot now if nothing must be waited for first.

        A call with no rate to keep and a slot free (the common case) then
        costs no coroutine and no event-loop pass here: the semaphore's
        acquire() always yields, even with slots to spare."""
        if self._rate is not None or self.rate_limit is not None:
            return False
        try:
            limiter.acquire_nowait()
        except anyio.WouldBlock:
            return False
        return True

    async def _admit(self, limiter: anyio.Semaphore) -> None:
        """Wait for the rate limit, then for a connection slot (taken on return)."""
        if self._rate is None and self.rate_limit is not None:
            self._rate = RateLimiter(self.rate_limit)
        hooks = self._hooks
        if self._rate is not None:
            acquire = self._rate.acquire()
            await (acquire if hooks is None else hooks.wait(hooks.RATE_LIMIT, acquire))
        try:
            limiter.acquire_nowait()
        except anyio.WouldBlock:
            waiting = limiter.acquire()
            await (waiting if hooks is None else hooks.wait(hooks.CONNECTION, waiting))

    @property
    def slowed_to(self) -> float | None:
        """Requests per second this client is held to after the service answered
        429 (see docs/client.md, Retries), or None when it goes at its own pace."""
        return None if self._slowdown is None else self._slowdown.rate

    def _slow_down(self, op: Operation[Any], wait: float | None, began: float) -> None:
        clock = self._clock or loop_clock()
        # The pace the refused attempt was part of: the calls in flight (its
        # own slot is already back) over how long it took.
        in_flight = self.max_connections + 1 - (self._limiter.value if self._limiter else 0)
        pace = in_flight / max(clock() - began, 0.001)
        slowdown = self._slowdown
        if slowdown is None:
            # Loaded by the first 429 only (docs/performance.md: start-up).
            from ._slowdown import Slowdown

            ceiling = self.rate_limit or pace
            slowdown = self._slowdown = Slowdown(self._rate, ceiling, clock, self._pace_back)
            self._rate = slowdown
        rate = slowdown.refused(pace, wait, sent_at=began)
        if rate is None:
            return  # sent at the old pace: the cut made for it holds
        # INFO, not WARNING: the progress line, hooks and metrics show it, and
        # a line of its own would break a live progress line.
        logger.info(
            "%s answered %s with 429: every request slowed to %.2f/s%s",
            self.base_url,
            op.name,
            rate,
            "" if wait is None else f", none before {wait:g} s (Retry-After)",
        )
        if self._hooks is not None:
            self._hooks.rate_changed(rate, op.name, wait)

    def _pace_back(self) -> None:
        if self._slowdown is not None:
            # Back at its own pace: no cost per request from here on.
            self._rate, self._slowdown = self._slowdown.inner, None
        logger.info("%s: back to the client's own pace after 429s", self.base_url)
        if self._hooks is not None:
            self._hooks.rate_changed(None, None, None)

    def _log(
        self,
        op: Operation[Any],
        binding: Binding,
        status: int | None,
        began: float,
        attempt: int,
        error: BaseException | None,
    ) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s binding=%s status=%s attempt=%d duration_ms=%.1f%s",
                op.name,
                binding.value,
                status,
                attempt,
                (anyio.current_time() - began) * 1000,
                f" error={type(error).__name__}: {self._scrub.text(str(error))}" if error else "",
            )


class _CallsAtOnce:
    """The poller's calls made without a coroutine: a call's first attempt
    on a connection ready now (``ConnectionPool.send_at_once``), its answer
    decoded from the connection's callback.

    Only the plain case is taken here: no rate to keep, a slot and a
    connection free, an answer decoded to a result. Anything else (a
    refusal, an error, a timeout) goes back to the caller as a FirstAttempt,
    for the client's retry loop to take as its first attempt's: retries,
    error mapping and logging stay in one place (``_exchange``).
    """

    __slots__ = ("_client", "_requests")

    def __init__(self, client: VerificationClient) -> None:
        self._client = client
        # Per operation, the codec (the binding's) and its requests prebuilt
        # with the id spliced in (see _transport._spliced), or None where the
        # id cannot be.
        self._requests: dict[str, tuple[Codec, IdRequests | None]] = {}

    def ready(self) -> bool:
        """Calls can start at once on the running event loop (asyncio or
        uvloop, our own pool, used on this loop already)."""
        client = self._client
        pool = client._connections
        return (
            isinstance(pool, ConnectionPool)
            and client._limiter is not None
            and pool.ready_at_once(client._owner)
        )

    def start(
        self,
        op: Operation[Any],
        request_id: int,
        retry: RetryPolicy,
        cut_at: float,
        done: Callable[[Any, object], None],
        context: Any,
    ) -> _CallAtOnce | None:
        """Start a call; None (and nothing sent) if it cannot start at once.
        ``done(context, outcome)`` gets the result, a FirstAttempt, or None
        if the attempt was cut at ``cut_at``."""
        client = self._client
        pool = client._connections
        limiter = client._limiter
        clock = client._clock
        if (
            client._closed
            or limiter is None
            or clock is None
            or not isinstance(pool, ConnectionPool)
            or not client._admitted_at_once(limiter)
        ):
            return None
        codec = client._codecs[client.binding]
        try:
            request = self._request(pool, codec, op, request_id)
        except Exception:
            # Encoded again by the call that takes it, and raised there.
            limiter.release()
            return None
        call = _CallAtOnce(client, op, codec, limiter, clock(), done, context)
        attempt = pool.send_at_once(
            request,
            time_limit=client._time_limit(retry, 0.0),
            cut_at=cut_at,
            max_response_bytes=client.max_response_bytes,
            operation=op.name,
            done=_answered_at_once,
            context=call,
        )
        if attempt is None:
            limiter.release()
            return None
        call.attempt = attempt
        return call

    def _request(
        self, pool: ConnectionPool, codec: Codec, op: Operation[Any], request_id: int
    ) -> HTTPRequest | bytes:
        """The request: prebuilt bytes with the id spliced in where it can be."""
        credentials = self._client._credentials
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


class _CallAtOnce:
    """One call started by _CallsAtOnce."""

    __slots__ = ("attempt", "began", "client", "codec", "context", "done", "limiter", "op")

    def __init__(
        self,
        client: VerificationClient,
        op: Operation[Any],
        codec: Codec,
        limiter: anyio.Semaphore,
        began: float,
        done: Callable[[Any, object], None],
        context: Any,
    ) -> None:
        self.client = client
        self.op = op
        self.codec = codec
        self.limiter = limiter
        self.began = began
        self.done = done
        self.context = context
        self.attempt: AttemptAtOnce | None = None

    def abandon(self) -> None:
        """The caller is gone: the attempt in flight, if any, ends unheard."""
        attempt = self.attempt
        if attempt is not None and not attempt.ended:
            attempt.abandon()
            self.limiter.release()


def _answered_at_once(call: _CallAtOnce, outcome: Answer | Exception | None) -> None:
    call.limiter.release()
    if outcome is None:
        call.done(call.context, None)  # cut at the caller's own deadline
        return
    if not isinstance(outcome, Exception):
        client = call.client
        status, headers, body = outcome
        try:
            result = client._decode(call.codec, call.op, status, headers, body)
        except Exception:
            pass  # decoded again, and raised, by the retry loop
        else:
            client._log(call.op, client.binding, status, call.began, 1, None)
            call.done(call.context, result)
            return
    call.done(call.context, FirstAttempt(call.began, outcome))


def _redecoded(
    codec: Codec,
    op: Operation[Any],
    status: int,
    headers: Sequence[tuple[str, str]],
    masked: bytes,
) -> VerifClientError | None:
    """The failure of a masked body, or None if it decodes. The failure's
    traceback keeps this frame, which holds only the masked body."""
    try:
        codec.decode(op, status, headers, masked)
    except VerifClientError as exc:
        # Raised while the unmasked failure was being handled, it would keep
        # that as its context (``from None`` only hides it from a printout).
        exc.__context__ = None
        return exc
    return None


def _check_number(option: str, value: object, *, integer: bool = False) -> None:
    """Refuse, at construction, an option value that would fail late with
    another library's error or quietly mean something else (a NaN rate is no
    limit at all, a NaN timeout never ends)."""
    kind = "an integer >= 1" if integer else "a number > 0"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ValueError(f"{option} must be {kind}, got {value!r}")
    if not value > 0:  # also false for NaN
        raise ValueError(f"{option} must be {kind}, got {value!r}")


def _split_userinfo(base_url: str) -> tuple[str, str | None]:
    """``base_url`` without ``user:password@``, and that userinfo (None without).

    Userinfo goes as HTTP Basic on every request, so it is refused over plain
    http, where anyone on the path would read it (SECURITY.md). The refusal
    names neither the URL nor its credentials."""
    scheme, separator, rest = base_url.partition("://")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not separator or not at:
        return base_url, None
    if scheme.lower() != "https":
        raise ValueError(
            "base_url: credentials in the URL (user:password@) would be sent in clear "
            "as HTTP Basic: give an https:// address, or pass username= and password= "
            "(which go in the SOAP header)"
        )
    return f"{scheme}://{host}{rest[end:]}", userinfo


def _site_root(base_url: str, endpoint_path: str) -> str:
    """``base_url`` without a trailing slash, and without the endpoint path
    when it was given the service's full address (it is added per request)."""
    url = base_url.rstrip("/")
    endpoint = endpoint_path.rstrip("/")
    try:
        parsed = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"base_url: {base_url!r} is not a URL ({exc})") from None
    if parsed.query or parsed.fragment:
        raise ValueError(
            f"base_url: {base_url!r} has a query or fragment; give the site's address, "
            f"e.g. {SANDBOX_BASE_URL!r}"
        )
    # IIS matches paths case-insensitively: so does this.
    if endpoint and url.lower().endswith(endpoint.lower()):
        return url[: len(url) - len(endpoint)]
    if parsed.path.lower().rstrip("/").endswith(".asmx"):
        raise ValueError(
            f"base_url: {base_url!r} ends in a service path other than endpoint_path "
            f"({endpoint_path!r}); give the site's address as base_url and the path as "
            "endpoint_path"
        )
    return url


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
