"""The asyncio read path (``_transport._receiver``) against peers of the test's own.

On asyncio over plain TCP the pool reads answers through a protocol of its own
with reading left on between answers. What that must not cost: memory to a
peer that pushes bytes into an idle connection, and order to a request the
peer answered before reading all of it. Trio (and TLS) read through the anyio
stream; the tests that only mean something on asyncio say so.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from proxysupport import ForwardProxy, forward_proxy, proxy_url
from relsupport import (
    PATCHES_THE_POOL,
    UVLOOP,
    WITH_UVLOOP,
    error_of_a_call_closed_under,
    wait_for,
)
from test_transport_bad_peers import (
    FAST_RETRY,
    GUARD,
    NOT_VERIFIED,
    VERIFIED_TRUE,
    MisbehavingWhileIdle,
    Wire,
    client,
    raw_server,
    send_sms,
)

import verif_client as vc
from verif_client._codec import HTTPRequest
from verif_client._transport import SendError, _pool
from verif_client._transport._proxy import Proxy
from verif_client._transport._receiver import AsyncioReceiver

# The pool's answers read by llhttp and by h11 alike.
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("answer_parser")]
asyncio_only = pytest.mark.parametrize("anyio_backend", ["asyncio", UVLOOP])


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


async def _answering(stream: anyio.abc.SocketStream) -> None:
    wire = Wire(stream)
    while await wire.request() is not None:
        await stream.send(VERIFIED_TRUE)


async def test_the_read_path_is_ours_on_asyncio_and_the_stream_on_trio(
    anyio_backend_name: str,
) -> None:
    # A silent fall-back to the stream would keep every test green and cost a
    # tenth of a polling request's CPU: the choice is asserted here.
    async with raw_server(_answering) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(4294967297)).verified is True
        (connection,) = c._connections._idle  # type: ignore[union-attr]
        if anyio_backend_name == "asyncio":
            assert isinstance(connection.receiver, AsyncioReceiver)
        else:
            assert connection.receiver is None
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(4294967298)).verified is True
        assert c._connections.open_connections == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.1 through a proxy"])
async def test_who_opens_a_connection_on_each_event_loop(
    anyio_backend: object, anyio_backend_name: str, host: str
) -> None:
    # The loop's own connection (no anyio stream) is cheaper to open and to
    # keep; anyio opens it where the loop's cannot do what anyio does: on
    # trio, through a proxy (the tunnel), and on uvloop for a name (no happy
    # eyeballs there); on asyncio our protocol then takes anyio's over. A
    # silent fall-back would keep every other test green: it is asserted here.
    host, _, through = host.partition(" through a ")
    async with raw_server(_answering) as port, forward_proxy(ForwardProxy()) as proxy_port:
        proxy = Proxy(proxy_url(proxy_port)) if through else None
        pool = _pool.ConnectionPool(f"http://{host}:{port}", proxy=proxy)
        request = HTTPRequest(method="GET", path="/", headers=(), body=b"")
        try:
            with anyio.fail_after(GUARD):
                await pool.send(request, time_limit=GUARD, max_response_bytes=1000, operation="X")
            (connection,) = pool._idle
            on_asyncio = anyio_backend_name == "asyncio"
            on_uvloop = isinstance(anyio_backend, tuple)  # ("asyncio", {"use_uvloop": True})
            loops_own = on_asyncio and not through and (host == "127.0.0.1" or not on_uvloop)
            assert (connection.stream is None) is loops_own
            assert isinstance(connection.receiver, AsyncioReceiver) is on_asyncio
        finally:
            await pool.aclose()


@asyncio_only
async def test_a_peer_pushing_bytes_into_an_idle_connection_is_cut_off_at_once() -> None:
    # Reading stays on between answers: without the cut-off, every byte such a
    # peer sends would be buffered until the connection was next checked out.
    pushed = 0

    async def push(stream: anyio.abc.ByteStream) -> None:
        nonlocal pushed
        while pushed < 256 * 1024 * 1024:
            await stream.send(b"x" * 65536)
            pushed += 65536

    server = MisbehavingWhileIdle(NOT_VERIFIED, push)
    async with raw_server(server) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(4294967297)).verified is False
            (connection,) = c._connections._idle  # type: ignore[union-attr]
            assert not connection.receiver.stray
            server.idle.set()
            await server.done.wait()
            assert connection.receiver.stray
            assert (await c.has_been_verified(4294967298)).verified is False
    # 256 MB were offered; the client closed the connection within what the
    # kernel's socket buffers hold.
    assert pushed < 64 * 1024 * 1024
    assert server.connections == 2


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_a_peer_pushing_into_an_idle_connection_fills_only_socket_buffers() -> None:
    # Trio reads through the anyio stream, which reads only while an answer is
    # awaited: what a peer pushes into an idle connection stays in the kernel's
    # socket buffers, and the peer's sends stop being taken. A client that read
    # (and buffered) them would let the push run to its 256 MB.
    pushed = 0
    stalled = 0

    async def push(stream: anyio.abc.ByteStream) -> None:
        nonlocal pushed, stalled
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        chunk = b"x" * 65536
        # Refused 50 times in a row, each after the client's tasks had their
        # turn: nobody reads this connection.
        while pushed < 256 * 1024 * 1024 and stalled < 50:
            try:
                pushed += sock.send(chunk, socket.MSG_DONTWAIT)
                stalled = 0
            except BlockingIOError:
                stalled += 1
            await anyio.lowlevel.checkpoint()

    server = MisbehavingWhileIdle(NOT_VERIFIED, push)
    async with raw_server(server) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(4294967297)).verified is False
            server.idle.set()
            await server.done.wait()
            assert (await c.has_been_verified(4294967298)).verified is False
    assert stalled == 50
    assert pushed < 64 * 1024 * 1024
    assert server.connections == 2


@asyncio_only
async def test_an_answer_before_the_whole_request_was_read_retires_the_connection() -> None:
    # The peer answers after the request's head and leaves the body unread, so
    # part of it still waits in the transport's buffer when the answer is
    # complete. Reused, that connection would send the next request's bytes
    # after the rest of this body: the connection must be closed instead.
    connections = 0
    second_request = anyio.Event()

    async def answer_early(stream: anyio.abc.SocketStream) -> None:
        nonlocal connections
        connections += 1
        if connections == 1:
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                buffer += await stream.receive()
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly")
            # Left unread until the client has moved on.
            await second_request.wait()
            return
        wire = Wire(stream)
        while (request := await wire.request()) is not None:
            assert request.startswith(b"POST /second ")
            second_request.set()
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")

    big = HTTPRequest(method="POST", path="/first", headers=(), body=b"x" * (64 * 1024 * 1024))
    small = HTTPRequest(method="POST", path="/second", headers=(), body=b"y")
    async with raw_server(answer_early) as port:
        pool = _pool.ConnectionPool(f"http://127.0.0.1:{port}")
        try:
            with anyio.fail_after(GUARD):
                status, _, body = await pool.send(
                    big, time_limit=GUARD, max_response_bytes=1000, operation="First"
                )
                assert (status, body) == (200, b"early")
                assert pool.open_connections == 0
                status, _, body = await pool.send(
                    small, time_limit=GUARD, max_response_bytes=1000, operation="Second"
                )
                assert (status, body) == (200, b"late")
        finally:
            await pool.aclose()
    assert connections == 2


@pytest.mark.parametrize("through", ["direct", "a proxy"])
async def test_a_connection_closed_by_the_pool_fails_a_waiting_call_as_closed(
    through: str,
) -> None:
    # aclose() while an answer is awaited: the waiting call ends with the
    # client's words for it, on both read paths, and on the connections
    # both ways open (the loop's own, or anyio's taken over, through a proxy).
    waiting = anyio.Event()

    async def never_answer(stream: anyio.abc.SocketStream) -> None:
        await Wire(stream).request()
        waiting.set()
        await anyio.sleep_forever()

    async with raw_server(never_answer) as port, forward_proxy(ForwardProxy()) as proxy_port:
        proxy = None if through == "direct" else Proxy(proxy_url(proxy_port))
        pool = _pool.ConnectionPool(f"http://127.0.0.1:{port}", proxy=proxy)
        request = HTTPRequest(method="GET", path="/", headers=(), body=b"")

        async def call() -> object:
            return await pool.send(request, time_limit=GUARD, max_response_bytes=100, operation="X")

        error = await error_of_a_call_closed_under(call, waiting, pool.aclose, SendError, GUARD)
    assert str(error) == "ReadError: the client was closed"
    assert error.never_sent is False


async def test_a_peer_reset_mid_answer_is_a_read_error_quoting_the_reset() -> None:
    async def reset_mid_answer(stream: anyio.abc.SocketStream) -> None:
        await Wire(stream).request()
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    async with raw_server(reset_mid_answer) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await c.has_been_verified(4294967297)
    assert str(caught.value).endswith("ReadError: [Errno 104] Connection reset by peer")


@PATCHES_THE_POOL
async def test_a_server_that_speaks_first_gets_no_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whatever such a server sends cannot be the answer to a request it has
    # not seen; and since nothing was written, an SMS is a plain transport
    # error (safe to retry), never "delivery unknown".
    requests = 0

    async def speak_first(stream: anyio.abc.SocketStream) -> None:
        nonlocal requests
        await stream.send(VERIFIED_TRUE)
        while await Wire(stream).request() is not None:
            requests += 1

    connect = _pool.ConnectionPool._connect

    async def connect_once_the_bytes_are_there(pool: _pool.ConnectionPool) -> Any:
        # The race made deterministic: the server's bytes have reached us
        # before the request would be written.
        connection = await connect(pool)
        await wait_for(lambda: bool(connection.poller.poll(0)) or _stray(connection), "bytes")
        return connection

    monkeypatch.setattr(_pool.ConnectionPool, "_connect", connect_once_the_bytes_are_there)
    async with raw_server(speak_first) as port, client(port, retry=FAST_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await send_sms(c)
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert str(caught.value).endswith(
        "RemoteProtocolError: the server sent bytes (or closed) before it was asked anything"
    )
    assert requests == 0


def _stray(connection: Any) -> bool:
    return connection.receiver is not None and connection.receiver.stray
