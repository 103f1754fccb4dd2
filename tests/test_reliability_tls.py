"""TLS: certificates are verified unless the caller explicitly says not to."""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.streams.tls import TLSListener
from realparts import missing_real_part
from relsupport import PASSWORD, USER, WITH_UVLOOP, wait_for
from test_transport_bad_peers import (
    GONE,
    GUARD,
    NOT_VERIFIED,
    VERIFIED_TRUE,
    AnswerOnceAndClose,
    MisbehavingWhileIdle,
    Wire,
    close_delimited,
)

import verif_client as vc
from verif_client._transport._pool import ConnectionPool, _untouched
from verif_client._transport._receiver import AsyncioReceiver
from verif_client.simulator import Simulator
from verif_client.simulator._server import Server, _Connection

pytestmark = pytest.mark.anyio


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:  # pragma: no cover
        missing_real_part("needs the openssl command to make a self-signed certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
async def https_url(certificate: tuple[Path, Path]) -> AsyncIterator[str]:
    """The simulator behind a self-signed certificate on loopback."""
    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    simulator = Simulator(credentials=(USER, PASSWORD))
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    server = Server("127.0.0.1", port)
    listener = TLSListener(tcp, context, standard_compatible=False)

    async def handle(stream: anyio.abc.ByteStream) -> None:
        await _Connection(simulator, stream, server).run()  # type: ignore[arg-type]

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield f"https://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def test_verification_is_on_by_default(
    https_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="verif_client")
    async with vc.VerificationClient(
        https_url, username=USER, password=PASSWORD, retry=vc.NO_RETRY
    ) as client:
        with anyio.fail_after(30), pytest.raises(vc.TransportError, match=r"(?i)certificate"):
            await client.get_mobile_consent_text()
    assert "verification is OFF" not in caplog.text


async def test_verify_false_works_and_warns(
    https_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="verif_client")
    async with vc.VerificationClient(
        https_url, username=USER, password=PASSWORD, verify=False
    ) as client:
        assert await client.get_mobile_consent_text()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "TLS certificate verification is OFF" in warnings[0].getMessage()
    assert https_url in warnings[0].getMessage()


async def test_a_trusted_certificate_verifies(
    https_url: str, certificate: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # The failure above is about trust, not a broken server: trusting the cert works.
    context = ssl.create_default_context(cafile=str(certificate[0]))
    caplog.set_level(logging.WARNING, logger="verif_client")
    async with vc.VerificationClient(
        https_url, username=USER, password=PASSWORD, verify=context
    ) as client:
        assert await client.get_mobile_consent_text()
    assert not caplog.records


# -- the connection layer over TLS ---------------------------------------------


@pytest.fixture
def trusting(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificate[0]))


@asynccontextmanager
async def tls_server(
    certificate: tuple[Path, Path], handle: Callable[[anyio.abc.ByteStream], Awaitable[None]]
) -> AsyncIterator[str]:
    """A raw server of the test's own behind the self-signed certificate."""
    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = TLSListener(tcp, context, standard_compatible=False)

    async def guarded(stream: anyio.abc.ByteStream) -> None:
        async with stream:
            with suppress(*GONE):
                await handle(stream)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, guarded)
        yield f"https://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


def trusting_client(url: str, trusting: ssl.SSLContext) -> vc.VerificationClient:
    return vc.VerificationClient(
        url, username=USER, password=PASSWORD, verify=trusting, retry=vc.NO_RETRY
    )


async def test_calls_over_tls_share_one_connection(
    https_url: str, trusting: ssl.SSLContext, anyio_backend_name: str
) -> None:
    async with trusting_client(https_url, trusting) as client:
        with anyio.fail_after(GUARD):
            for _ in range(3):
                assert await client.get_mobile_consent_text()
        pool = client._connections
        assert isinstance(pool, ConnectionPool)
        (connection,) = pool._idle
        # asyncio's TLS layer under our protocol on asyncio; anyio's TLS stream on trio.
        assert isinstance(connection.receiver, AsyncioReceiver) is (anyio_backend_name == "asyncio")
        assert pool.open_connections == 1


async def test_an_unrequested_answer_over_tls_never_answers_the_next_call(
    certificate: tuple[Path, Path], trusting: ssl.SSLContext
) -> None:
    # The extra answer arrives while the connection is idle, encrypted: only
    # the TLS layer can tell it is there, and the connection must not be reused.
    async def answer_again(stream: anyio.abc.ByteStream) -> None:
        await stream.send(VERIFIED_TRUE)

    server = MisbehavingWhileIdle(NOT_VERIFIED, answer_again)
    async with tls_server(certificate, server) as url, trusting_client(url, trusting) as client:
        with anyio.fail_after(GUARD):
            assert (await client.has_been_verified(4294967297)).verified is False
            pool = client._connections
            assert isinstance(pool, ConnectionPool)
            (connection,) = pool._idle
            server.idle.set()
            await server.done.wait()
            await wait_for(lambda: not _untouched(connection), "the extra answer arrived")
            assert (await client.has_been_verified(4294967298)).verified is False
    assert server.connections == 2


@pytest.mark.parametrize("framing", ["http/1.0", "connection-close"])
async def test_close_delimited_answers_over_tls_are_read_and_never_reused(
    certificate: tuple[Path, Path], trusting: ssl.SSLContext, framing: str
) -> None:
    # The server closes without a TLS close_notify (as IIS and many others do):
    # the answer is still whole, and the next call opens a new connection.
    handle = AnswerOnceAndClose(close_delimited(framing))

    async with tls_server(certificate, handle) as url, trusting_client(url, trusting) as client:
        with anyio.fail_after(GUARD):
            for request_id in (4294967297, 4294967298):
                assert (await client.has_been_verified(request_id)).verified is True
    assert handle.connections == 2


# -- bytes in the same read as the answer ----------------------------------------


class RecordWriter:
    """The server side of TLS by hand (``ssl.SSLObject`` over memory BIOs), so
    that the test decides which bytes share a TLS record and a TCP write."""

    def __init__(self, stream: anyio.abc.ByteStream, context: ssl.SSLContext) -> None:
        self.stream = stream
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.plain = b""

    async def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            await self.stream.send(data)

    async def _more(self) -> bool:
        """Feed the TLS layer the next bytes from the client; False once it hung up."""
        await self._flush()
        try:
            self.incoming.write(await self.stream.receive())
        except GONE:
            return False
        return True

    async def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                if not await self._more():
                    raise anyio.EndOfStream from None
            else:
                await self._flush()
                return

    async def request(self) -> bytes | None:
        """The next request's head (the client's requests here have no body), or
        None once the client closed the connection."""
        while b"\r\n\r\n" not in self.plain:
            try:
                self.plain += self.tls.read(65536)
            except ssl.SSLWantReadError:
                if not await self._more():
                    return None
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return None
        head, _, self.plain = self.plain.partition(b"\r\n\r\n")
        return head

    async def send(self, *records: bytes) -> None:
        """Each of ``records`` in a TLS record of its own, all in one TCP write."""
        for record in records:
            self.tls.write(record)
        await self._flush()


class AnswerWithExtraBytes:
    """Its first connection answers the first request and, in the same TCP write
    (``shared``: in the same TLS record, else in the next one), a second answer
    nobody asked for; then it waits for the client to close it. Every later
    connection answers each request truthfully."""

    def __init__(self, context: ssl.SSLContext, *, shared: bool) -> None:
        self.context = context
        self.shared = shared
        self.connections = 0
        self.first_closed = anyio.Event()

    async def __call__(self, stream: anyio.abc.ByteStream) -> None:
        self.connections += 1
        first = self.connections == 1
        peer = RecordWriter(stream, self.context)
        try:
            await peer.handshake()
            while await peer.request() is not None:
                if not first:
                    await peer.send(NOT_VERIFIED)
                elif self.shared:
                    await peer.send(NOT_VERIFIED + VERIFIED_TRUE)
                else:
                    await peer.send(NOT_VERIFIED, VERIFIED_TRUE)
        finally:
            if first:
                self.first_closed.set()


@pytest.mark.usefixtures("answer_parser")
@pytest.mark.parametrize("shared", [True, False], ids=["same-record", "next-record"])
async def test_bytes_read_with_the_answer_are_never_the_next_calls_answer(
    certificate: tuple[Path, Path], trusting: ssl.SSLContext, shared: bool
) -> None:
    # One TCP write brings the answer and an unrequested "verified": in one
    # read off the socket. In the same record, the parser sees bytes after the
    # answer; in the next record, they wait undecrypted in the TLS layer's
    # buffer (trio: anyio's TLS stream), where no peek at the socket sees them.
    # Either way the connection is closed and the second call asks anew.
    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    server = AnswerWithExtraBytes(context, shared=shared)

    async def guarded(stream: anyio.abc.ByteStream) -> None:
        async with stream:
            with suppress(*GONE):
                await server(stream)

    url = f"https://127.0.0.1:{port}"
    async with tcp, anyio.create_task_group() as tg, trusting_client(url, trusting) as client:
        tg.start_soon(tcp.serve, guarded)
        with anyio.fail_after(GUARD):
            assert (await client.has_been_verified(4294967297)).verified is False
            assert (await client.has_been_verified(4294967298)).verified is False
            await server.first_closed.wait()
        tg.cancel_scope.cancel()
    assert server.connections == 2


async def test_an_sms_whose_connection_is_reset_after_it_went_out_over_tls_is_delivery_unknown(
    certificate: tuple[Path, Path], trusting: ssl.SSLContext
) -> None:
    # Over TLS the request goes out through the TLS layer, not one write(2):
    # once it has, a reset means the service may have it, and an SMS is not
    # sent again behind the caller's back.
    requests = 0

    async def read_then_reset(stream: anyio.abc.ByteStream) -> None:
        nonlocal requests
        if await Wire(stream).request() is None:
            return
        requests += 1
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    async with (
        tls_server(certificate, read_then_reset) as url,
        vc.VerificationClient(url, username=USER, password=PASSWORD, verify=trusting) as client,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.DeliveryUnknownError):
            await client.send_confirmation_sms("5551234567", "Pay?")
    assert requests == 1


@pytest.mark.parametrize(
    ("userinfo", "token"),
    [
        ("user:p@ss", b"dXNlcjpwQHNz"),  # user:p@ss
        ("ops%40acme", b"b3BzQGFjbWU6"),  # ops@acme: (a user and no password)
    ],
)
async def test_a_base_url_with_credentials_and_a_path_gives_the_host_and_target_alone(
    certificate: tuple[Path, Path], trusting: ssl.SSLContext, userinfo: str, token: bytes
) -> None:
    # Credentials in an https:// URL go as HTTP Basic (an empty password when
    # none is given), never into the Host header (an "@" in the password
    # included), and the URL's path prefixes the target.
    heads: list[bytes] = []

    async def handle(stream: anyio.abc.ByteStream) -> None:
        request = await Wire(stream).request()
        if request is not None:
            heads.append(request.partition(b"\r\n\r\n")[0])
            await stream.send(NOT_VERIFIED)

    async with tls_server(certificate, handle) as url:
        port = int(url.rpartition(":")[2])
        with_credentials = f"https://{userinfo}@127.0.0.1:{port}/svcX/"
        async with vc.VerificationClient(
            with_credentials, verify=trusting, retry=vc.NO_RETRY
        ) as client:
            with anyio.fail_after(GUARD):
                assert (await client.has_been_verified(4294967297)).verified is False
    (head,) = heads
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /svcX/verificationservices/v5/InquiriesWS-5-8.asmx HTTP/1.1"
    assert b"Host: 127.0.0.1:%d" % port in lines
    assert b"Authorization: Basic " + token in lines
