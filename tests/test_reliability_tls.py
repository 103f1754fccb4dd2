"""TLS: certificates are verified unless the caller explicitly says not to."""

from __future__ import annotations

import logging
import shutil
import ssl
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
