"""The simulator: an ASGI 3 application imitating the service, plus its controls."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._results import Location
from .._service import DEFAULT_NAMESPACE
from . import _phone
from . import _responses as r
from ._asmx import MAX_REQUEST_BYTES, AsmxEndpoint, Call, Request, header_map
from ._config import Script, SimulatorConfig
from ._server import ConnectionDropped
from ._state import SecureLinkRequest, ServiceState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

if TYPE_CHECKING:
    from ._transport import SimulatorTransport


@attrs.frozen(slots=True)
class LoggedRequest:
    """One call to an operation, as the simulator received it.

    ``params`` maps each wire name to its text exactly as received (SOAP
    children of the operation element, or query/form fields); ``status`` is
    ``None`` when the connection was dropped. The password is never kept.
    """

    operation: str | None
    binding: str
    params: Mapping[str, str]
    credentials_present: bool
    soap_action: str | None
    status: int | None
    dropped: bool = False
    username: str | None = None
    content_type: str | None = None
    method: str = "POST"
    path: str = ""


class Simulator:
    """An in-memory imitation of the VerificationServices v5 ASMX endpoint.

    Use it as an ASGI app (``httpx.ASGITransport(app=simulator)``) or on a port
    with :func:`serve`. As the service does, every SOAP call must carry an
    ``AuthenticationHeader``: with ``credentials=None`` any non-empty username
    and password pass, with ``credentials=(username, password)`` only these; a
    missing or empty one is answered as wrong credentials.
    ``accept_any_credentials=True`` lets every SOAP call through, with or
    without credentials. HTTP GET/POST calls carry no credentials on the real
    service and are always accepted.
    ``manual=True`` (or ``SimulatorConfig(manual=True)``) leaves every request
    pending until a person answers it on the phone pages under ``/phone/``.
    """

    def __init__(
        self,
        credentials: tuple[str, str] | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        config: SimulatorConfig | None = None,
        *,
        manual: bool = False,
        accept_any_credentials: bool = False,
    ) -> None:
        if accept_any_credentials and credentials is not None:
            raise ValueError("give credentials or accept_any_credentials=True, not both")
        self.config = config or SimulatorConfig()
        if manual:
            self.config = attrs.evolve(self.config, manual=True)
        self.namespace = namespace
        self.requests: list[LoggedRequest] = []
        self._state = ServiceState(self.config)
        self._rng = random.Random(self.config.seed)
        self._endpoint = AsmxEndpoint(
            self._state,
            namespace=namespace,
            endpoint_path=self.config.endpoint_path,
            credentials=credentials,
            accept_any_credentials=accept_any_credentials,
            credential_failure=self.config.credential_failure,
            throws=self.config.throws,
        )
        self._phone = _phone.PhonePages(self)

    def __repr__(self) -> str:
        return f"<Simulator {self.namespace!r} {len(self._state.requests)} SecureLink requests>"

    # -- driving the service's state ------------------------------------------

    @property
    def secure_links(self) -> list[SecureLinkRequest]:
        """Every SMS "sent" so far, oldest first (live objects: read, don't modify)."""
        return list(self._state.requests.values())

    def secure_link(self, request_id: int) -> SecureLinkRequest:
        """The SMS request ``request_id``: number, question, state, poll counts.

        Raises:
            KeyError: No such request.
        """
        return self._state.get(request_id)

    def verify(self, request_id: int) -> None:
        """The owner answered "Yes": HasBeenVerified now returns true."""
        self._settle(request_id, "verified")

    def decline(self, request_id: int) -> None:
        """The owner answered "No": HasBeenVerified now returns false."""
        self._settle(request_id, "declined")

    def _settle(self, request_id: int, outcome: Any) -> None:
        with self._state.lock:
            self._state.get(request_id).verification = outcome

    def share_location(self, request_id: int, location: Location) -> None:
        """The owner shares ``location``: MobileLocation_GetResult returns it
        from now on.
        """
        with self._state.lock:
            request = self._state.get(request_id)
            request.location_state = "shared"
            request.location = location

    def deny_location(self, request_id: int) -> None:
        """The owner refuses: MobileLocation_GetResult answers "not available"
        from now on.
        """
        with self._state.lock:
            request = self._state.get(request_id)
            request.location_state = "denied"
            request.location = None

    def script_for(self, target: str | int, script: Script) -> None:
        """Script a request: by id (an existing request) or by phone number (future ones)."""
        with self._state.lock:
            if isinstance(target, int):
                self._state.get(target).script = script
            else:
                self._state.scripts_by_phone[target] = script

    def record_consent(self, number: str) -> None:
        """Record consent for ``number`` (what RevokeMobileConsent then revokes)."""
        with self._state.lock:
            self._state.consent[number] = True

    def revoke_consent(self, number: str) -> bool:
        """What RevokeMobileConsent does: True when there was a consent to revoke."""
        return self._state.revoke_mobile_consent(number)

    def has_consent(self, number: str) -> bool:
        """Whether ``number`` has consent now."""
        return self._state.has_consent(number)

    @property
    def consent_text(self) -> str:
        """What GetMobileConsentText returns (settable)."""
        return self._state.consent_text

    @consent_text.setter
    def consent_text(self, text: str) -> None:
        self._state.consent_text = text

    @property
    def bad_checks(self) -> dict[int, str]:
        """The bad-check items that exist, id -> CheckRejectReason (mutable)."""
        return self._state.bad_checks

    def reset_log(self) -> None:
        """Forget the requests logged so far."""
        self.requests.clear()

    def calls(self, operation: str | None = None) -> list[LoggedRequest]:
        """The logged calls, optionally only those of one operation."""
        return [req for req in self.requests if operation in (None, req.operation)]

    # -- ASGI -------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        await _send(send, await self.handle(await _read_request(scope, receive)))

    def transport(self, base_url: str = "http://simulator") -> SimulatorTransport:
        """An in-process transport for ``VerificationClient(transport=...)`` that
        hands each request to this simulator directly, with no HTTP or ASGI
        objects in between: the cheap way to test in process. ``base_url`` is
        the address the simulator believes it was called at (its Host header)."""
        from ._transport import SimulatorTransport

        return SimulatorTransport(self, base_url)

    async def handle(self, request: Request) -> r.Response:
        """Answer one request; raises ConnectionDropped when it is to be dropped."""
        # The phone pages are the simulator's own, not the service's: a blocked
        # caller or injected faults must not stop the person answering.
        if _phone.handles(request.path):
            return self._phone.route(request)
        if self.config.blocked:
            return r.unauthorized()
        routed = self._endpoint.route(request)
        if isinstance(routed, r.Response):
            return routed
        return await self._serve_call(request, routed)

    async def _serve_call(self, request: Request, call: Call) -> r.Response:
        config = self.config
        # Draw every random number up front so one seed always gives one sequence.
        delay = config.latency + self._rng.uniform(0.0, config.jitter)
        fail_503, drop, malformed = (self._rng.random() for _ in range(3))
        if delay > 0:
            await anyio.sleep(delay)
        if fail_503 < config.fail_503:
            response = r.service_unavailable()
        elif call.error is not None:
            response = call.error
        else:
            response = self._endpoint.execute(call)
        dropped = drop < config.drop
        if not dropped and malformed < config.malformed and response.status == 200:
            response = attrs.evolve(response, body=response.body[: len(response.body) // 2])
        self.requests.append(
            LoggedRequest(
                operation=call.operation.name if call.operation else None,
                binding=call.binding,
                params=call.params,
                credentials_present=call.credentials_present,
                soap_action=call.soap_action,
                status=None if dropped else response.status,
                dropped=dropped,
                username=call.username,
                content_type=call.content_type,
                method=request.method,
                path=request.path,
            )
        )
        if dropped:
            raise ConnectionDropped()
        return response


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_request(scope: Scope, receive: Receive) -> Request:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_REQUEST_BYTES:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    headers, repeated = header_map(
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in scope.get("headers", [])
    )
    server = scope.get("server") or ("localhost", None)
    host = headers.get("host") or (f"{server[0]}:{server[1]}" if server[1] else server[0])
    too_large = size > MAX_REQUEST_BYTES
    return Request(
        method=scope["method"].upper(),
        path=scope["path"],
        query=scope.get("query_string", b""),
        headers=headers,
        body=b"" if too_large else b"".join(chunks),
        host=host,
        scheme=scope.get("scheme", "http"),
        repeated=repeated,
        server_host=server[0],
        too_large=too_large,
    )


async def _send(send: Send, response: r.Response) -> None:
    body = response.body
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.headers
    ]
    headers.append((b"content-length", str(len(body)).encode("ascii")))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
