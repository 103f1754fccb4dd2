"""The pool's TLS connect against servers of the test's own that bend the handshake.

Each server does its side of the handshake by hand (the standard library's TLS
object over memory buffers), so it decides when each flight leaves: held until
the test says so, never sent, or followed by bytes nobody asked for in the
same TCP write. What the caller must see: a connect that never finishes is a
connect timeout, a client closed while it connects ends the call as never
sent, and a server that speaks before it was asked anything is not answering.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest
from proxysupport import (
    SERVICE,
    Certificates,
    ForwardProxy,
    forward_proxy,
    proxy_url,
    without_proxy_variables,
)
from relsupport import (
    PASSWORD,
    USER,
    WITH_UVLOOP,
    client_sockets_to,
    error_of_a_call_closed_under,
    wait_for,
)
from test_transport_bad_peers import GONE, GUARD, VERIFIED_TRUE, send_sms

import verif_client as vc

pytestmark = pytest.mark.anyio

Handler = Callable[[anyio.abc.SocketStream], Awaitable[None]]


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates()


@asynccontextmanager
async def tls_peer(handle: Handler) -> AsyncIterator[int]:
    """Serve ``handle`` (which speaks TLS itself) on a loopback port; yield the port."""

    async def guarded(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with suppress(*GONE, ssl.SSLError):
                await handle(stream)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, guarded)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


class ServerTLS:
    """The server's end of one TLS connection, over the raw stream."""

    def __init__(self, stream: anyio.abc.ByteStream, context: ssl.SSLContext) -> None:
        self.stream = stream
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)

    async def handshake(self, received: bytes = b"", *, then: bytes = b"") -> None:
        """Finish the handshake from the client's ``received`` bytes; ``then``
        goes out encrypted in the same TCP write as the server's last flight."""
        self.incoming.write(received)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                if self.outgoing.pending:
                    await self.stream.send(self.outgoing.read())
                self.incoming.write(await self.stream.receive())
        if then:
            self.tls.write(then)
        if self.outgoing.pending:
            await self.stream.send(self.outgoing.read())

    async def receive(self) -> bytes:
        """Decrypted bytes from the client; b"" once it closed."""
        while True:
            try:
                return self.tls.read(65536)
            except ssl.SSLWantReadError:
                try:
                    self.incoming.write(await self.stream.receive())
                except GONE:
                    return b""


def client(port: int, certificates: Certificates, **options: object) -> vc.VerificationClient:
    return vc.VerificationClient(
        f"https://127.0.0.1:{port}",
        username=USER,
        password=PASSWORD,
        verify=certificates.trusting(),
        **options,  # type: ignore[arg-type]
    )


async def test_a_handshake_that_never_finishes_is_a_connect_timeout(
    certificates: Certificates,
) -> None:
    # The server takes the TCP connection and the ClientHello, and never
    # answers: the attempt's one deadline ends it as a connect timeout, so an
    # SMS is safe to send again (never "delivery unknown").
    hellos = 0

    async def silent(stream: anyio.abc.SocketStream) -> None:
        nonlocal hellos
        await stream.receive()
        hellos += 1
        await anyio.sleep_forever()

    async with (
        tls_peer(silent) as port,
        client(port, certificates, timeout=0.3, retry=vc.NO_RETRY) as c,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await send_sms(c)
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert str(caught.value).endswith(
        f"ConnectTimeout: no connection to 127.0.0.1:{port} within 0.3 s"
    )
    assert hellos == 1


async def test_a_handshake_through_a_proxy_that_never_finishes_names_the_proxy(
    certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tunnel opens, the service behind it never answers the ClientHello:
    # the connect timeout says which way the connection went (never the
    # proxy's password).
    without_proxy_variables(monkeypatch)

    async def silent(stream: anyio.abc.SocketStream) -> None:
        await stream.receive()
        await anyio.sleep_forever()

    proxy = ForwardProxy()
    async with (
        tls_peer(silent) as port,
        forward_proxy(proxy) as proxy_port,
        vc.VerificationClient(
            f"https://{SERVICE}:{port}",
            username=USER,
            password=PASSWORD,
            verify=certificates.trusting(),
            proxy=proxy_url(proxy_port),
            timeout=0.3,
            retry=vc.NO_RETRY,
        ) as c,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await send_sms(c)
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert str(caught.value).endswith(
        f"ConnectTimeout: no connection to {SERVICE}:{port} "
        f"through the proxy http://127.0.0.1:{proxy_port} within 0.3 s"
    )
    assert proxy.tunnels == 1


async def test_a_client_closed_while_it_connects_ends_the_call_as_never_sent(
    certificates: Certificates,
) -> None:
    # The server holds the handshake until the client is closed, then
    # completes it: the connection that opens after aclose() carries nothing,
    # and the call ends with the client's words for it, never as "delivery
    # unknown" (no byte of the SMS request left).
    context = certificates.server_context()
    connecting, closed = anyio.Event(), anyio.Event()
    requests: list[bytes] = []

    async def held(stream: anyio.abc.SocketStream) -> None:
        hello = await stream.receive()
        connecting.set()
        await closed.wait()
        server = ServerTLS(stream, context)
        await server.handshake(hello)
        while data := await server.receive():
            requests.append(data)

    async with tls_peer(held) as port:
        c = client(port, certificates, retry=vc.NO_RETRY)

        async def close() -> None:
            await c.aclose()
            closed.set()

        error = await error_of_a_call_closed_under(
            lambda: send_sms(c), connecting, close, vc.TransportError, GUARD
        )
    assert not isinstance(error, vc.DeliveryUnknownError)
    assert str(error).endswith("ConnectError: the client was closed")
    assert requests == []


async def test_a_tls_server_that_speaks_first_gets_no_request(
    certificates: Certificates,
) -> None:
    # A TLS 1.2 server's last handshake flight, and an answer nobody asked
    # for in the same TCP write: by the time the handshake is done the answer
    # is already in (asyncio's TLS layer hands it over, anyio's TLS stream
    # keeps it in its buffer), where no peek at the socket sees it. It is no
    # answer to a request not yet written: the call fails as never sent.
    context = certificates.server_context()
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    connections = 0
    requests: list[bytes] = []

    async def speaks_first(stream: anyio.abc.SocketStream) -> None:
        nonlocal connections
        connections += 1
        server = ServerTLS(stream, context)
        await server.handshake(then=VERIFIED_TRUE)
        while data := await server.receive():
            requests.append(data)

    async with tls_peer(speaks_first) as port, client(port, certificates, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await c.has_been_verified(4294967297)
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as sms:
            await send_sms(c)
        # Refused before the pool ever held them: closed there and then, not
        # left for the garbage collector (the client's close never sees them).
        await wait_for(lambda: client_sockets_to(port) == 0, "both refused connections closed")
    message = "the server sent bytes (or closed) before it was asked anything"
    assert message in str(caught.value)
    assert message in str(sms.value)
    assert not isinstance(sms.value, vc.DeliveryUnknownError)
    assert requests == []
    assert connections == 2


async def test_a_server_that_hangs_up_during_the_handshake_is_a_connect_error_naming_it(
    certificates: Certificates,
) -> None:
    # asyncio's TLS layer reports this as a ConnectionResetError without
    # words: the error's name is then what the caller reads. Nothing of the
    # SMS left, so it is a plain transport error, not "delivery unknown".
    async def hang_up(stream: anyio.abc.SocketStream) -> None:
        await stream.receive()

    async with (
        tls_peer(hang_up) as port,
        client(port, certificates, retry=vc.NO_RETRY) as c,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await send_sms(c)
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    reason = str(caught.value).partition(": ConnectError: ")[2]
    eof = r"\[SSL: UNEXPECTED_EOF_WHILE_READING\] EOF occurred in violation of protocol \(.*\)"
    assert re.fullmatch(rf"ConnectionResetError|{eof}", reason), reason
