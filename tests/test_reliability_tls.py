"""TLS: certificates are verified unless the caller explicitly says not to."""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.streams.tls import TLSListener
from relsupport import PASSWORD, USER

import verif_client as vc
from verif_client.simulator import Simulator
from verif_client.simulator._server import Server, _Connection

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:  # pragma: no cover
        pytest.skip("needs the openssl command to make a self-signed certificate")
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
