"""Client certificates (mutual TLS): cert= against a TLS server that requires one."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from proxysupport import (
    SERVICE,
    Certificates,
    ForwardProxy,
    forward_proxy,
    simulator_server,
    tls_front,
)
from relsupport import PASSWORD, USER, WITH_UVLOOP
from test_transport_bad_peers import GUARD

import verif_client as vc
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio

FAST = vc.RetryPolicy(attempts=2, initial_backoff=0.001, max_backoff=0.002, deadline=10)
KEY_PASSWORD = "K3y-pa55-0b7a-never-show"


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates(service_name="127.0.0.1")


@pytest.fixture(scope="module")
def files(certificates: Certificates, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The client's certificate as each shape of cert= takes it."""
    folder = tmp_path_factory.mktemp("client-cert")
    client = certificates.client
    paths = {name: folder / f"{name}.pem" for name in ("both", "cert", "key", "locked")}
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["both"]))
    client.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    client.private_key_pem.write_to_path(str(paths["key"]))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    paths["locked"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        )
    )
    return paths


@pytest.fixture
def sim() -> Simulator:
    return Simulator(credentials=(USER, PASSWORD))


@pytest.fixture
async def mtls_url(certificates: Certificates, sim: Simulator) -> AsyncIterator[str]:
    context = certificates.server_context(require_client_cert=True)
    async with simulator_server(sim) as plain:
        with tls_front(context, plain) as port:
            yield f"https://127.0.0.1:{port}"


def client(url: str, certificates: Certificates, **options: Any) -> vc.VerificationClient:
    options.setdefault("verify", certificates.trusting())
    return vc.VerificationClient(url, username=USER, password=PASSWORD, retry=FAST, **options)


def shapes(files: dict[str, Path]) -> list[Any]:
    return [
        files["both"],
        str(files["both"]),
        (files["cert"], files["key"]),
        (str(files["cert"]), str(files["locked"]), KEY_PASSWORD),
    ]


async def test_every_shape_of_cert_is_shown_to_the_server(
    mtls_url: str, certificates: Certificates, files: dict[str, Path], sim: Simulator
) -> None:
    for cert in shapes(files):
        async with client(mtls_url, certificates, cert=cert) as c:
            with anyio.fail_after(GUARD):
                assert await c.get_mobile_consent_text() == sim.consent_text
    assert len(sim.requests) == 4


async def test_cert_is_loaded_into_a_context_given_as_verify(
    mtls_url: str, certificates: Certificates, files: dict[str, Path]
) -> None:
    context = certificates.trusting()
    async with client(mtls_url, certificates, verify=context, cert=files["both"]) as c:
        assert await c.get_mobile_consent_text()
    # The context of yours now holds the certificate too (cert= wins over one loaded before).
    async with client(mtls_url, certificates, verify=context) as c:
        assert await c.get_mobile_consent_text()


async def test_no_certificate_for_a_server_that_wants_one_is_a_clear_error(
    mtls_url: str, certificates: Certificates, sim: Simulator
) -> None:
    async with client(mtls_url, certificates) as c:
        with (
            anyio.fail_after(GUARD),
            pytest.raises(vc.TransportError, match="none was given") as caught,
        ):
            await c.send_confirmation_sms("5125550100", "Is this you?")
    # The handshake failed: no request reached the service, so a send is not in doubt.
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert "cert=" in str(caught.value)
    # OpenSSL's own words for the server's alert follow, as the evidence.
    assert "alert certificate required" in str(caught.value).partition("--client-cert): ")[2]
    assert sim.requests == []


async def test_a_certificate_the_server_does_not_trust_is_refused_clearly(
    mtls_url: str, certificates: Certificates, tmp_path: Path
) -> None:
    stranger = trustme.CA().issue_cert("stranger@acme.test")
    path = tmp_path / "stranger.pem"
    stranger.private_key_and_cert_chain_pem.write_to_path(str(path))
    async with client(mtls_url, certificates, cert=path) as c:
        with (
            anyio.fail_after(GUARD),
            pytest.raises(vc.TransportError, match="refused the client certificate"),
        ):
            await c.get_mobile_consent_text()


async def test_mutual_tls_through_a_proxy(
    certificates: Certificates, files: dict[str, Path], sim: Simulator
) -> None:
    named = Certificates(service_name=SERVICE)
    named.ca = certificates.ca  # one CA signs the service and trusts the client
    named.service = certificates.ca.issue_cert(SERVICE)
    proxy = ForwardProxy()
    context = named.server_context(require_client_cert=True)
    async with simulator_server(sim, context) as port, forward_proxy(proxy) as proxy_port:
        proxy_url = f"http://proxy-user:Pr0xy-pa55-9c2e-never-show@127.0.0.1:{proxy_port}"
        url = f"https://{SERVICE}:{port}"
        async with client(url, named, cert=files["both"], proxy=proxy_url) as c:
            assert await c.get_mobile_consent_text()
    assert proxy.tunnels == 1


def test_a_bad_cert_fails_at_construction_naming_it(files: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(ValueError, match="cert: no such file") as caught:
        vc.VerificationClient("https://x.test", cert=missing)
    assert str(missing) in str(caught.value)
    with pytest.raises(ValueError, match="cannot load") as caught:
        vc.VerificationClient("https://x.test", cert=(files["cert"], files["locked"], "wrong"))
    assert "wrong" not in str(caught.value)
    with pytest.raises(ValueError, match="cannot load"):
        vc.VerificationClient("https://x.test", cert=files["cert"])  # no key in it
    with pytest.raises(ValueError, match="cert: give"):
        vc.VerificationClient("https://x.test", cert=(1, 2))  # type: ignore[arg-type]


async def test_the_key_password_is_in_no_repr_or_error(
    mtls_url: str, certificates: Certificates, files: dict[str, Path]
) -> None:
    cert = (files["cert"], files["locked"], KEY_PASSWORD)
    async with client(mtls_url, certificates, cert=cert) as c:
        assert KEY_PASSWORD not in repr(c) + repr(c._cert) + str(vars(c))


async def test_ssl_cert_file_names_the_cas_to_trust_unless_trust_env_is_false(
    monkeypatch: pytest.MonkeyPatch,
    mtls_url: str,
    certificates: Certificates,
    files: dict[str, Path],
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.pem"
    certificates.ca.cert_pem.write_to_path(str(ca))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    options: dict[str, Any] = {"username": USER, "password": PASSWORD, "retry": FAST}
    async with vc.VerificationClient(mtls_url, cert=files["both"], **options) as c:
        assert await c.get_mobile_consent_text()
    async with vc.VerificationClient(mtls_url, cert=files["both"], trust_env=False, **options) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError, match="certificate"):
            await c.get_mobile_consent_text()


async def test_a_tls_1_2_server_wanting_a_certificate_is_a_clear_error_too(
    certificates: Certificates, sim: Simulator
) -> None:
    # Under TLS 1.2 the refusal ends the handshake itself, as a bare handshake failure.
    context = certificates.server_context(require_client_cert=True)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    async with simulator_server(sim) as plain:
        with tls_front(context, plain) as port:
            url = f"https://127.0.0.1:{port}"
            async with client(url, certificates) as c:
                with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
                    await c.send_confirmation_sms("5125550100", "Is this you?")
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    # A bare handshake failure may have other causes: the error says what it may mean.
    assert "refused the TLS handshake (does it want a client certificate?" in str(caught.value)
    assert "alert handshake failure" in str(caught.value).partition("--client-cert): ")[2]
    assert sim.requests == []
