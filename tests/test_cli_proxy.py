"""The command line behind a proxy and with a client certificate: verif-client in a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from proxysupport import (
    PROXY_PASSWORD,
    SERVICE,
    Certificates,
    ForwardProxy,
    proxy_in_thread,
    proxy_url,
    tls_front,
    without_proxy_variables,
)
from relsupport import PASSWORD, USER, run_cli

from verif_client.simulator import Simulator, serve_in_thread


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxy_variables(monkeypatch)


@pytest.fixture
def sim() -> Simulator:
    return Simulator(credentials=(USER, PASSWORD))


@pytest.fixture
def service_port(sim: Simulator) -> Iterator[int]:
    with serve_in_thread(sim) as server:
        yield server.port


@pytest.fixture
def proxy() -> ForwardProxy:
    return ForwardProxy()


@pytest.fixture
def proxy_port(proxy: ForwardProxy) -> Iterator[int]:
    with proxy_in_thread(proxy) as port:
        yield port


def assert_no_proxy_password(*texts: str) -> None:
    for text in texts:
        assert PROXY_PASSWORD not in text
        assert "Pr0xy" not in text


def test_call_goes_through_http_proxy_from_the_environment(
    sim: Simulator, service_port: int, proxy: ForwardProxy, proxy_port: int
) -> None:
    result = run_cli(
        *("call", "GetMobileConsentText", "-v"),
        base_url=f"http://{SERVICE}:{service_port}",
        HTTP_PROXY=proxy_url(proxy_port),
    )
    assert result.returncode == 0, result.stderr
    assert sim.consent_text[:20] in result.stdout
    assert len(proxy.heads) == 1
    assert proxy.heads[0].startswith(f"POST http://{SERVICE}:{service_port}/".encode())
    assert_no_proxy_password(result.stdout, result.stderr)


def test_call_takes_the_proxy_from_verif_proxy_and_a_flag_without_password(
    service_port: int, proxy: ForwardProxy, proxy_port: int
) -> None:
    base_url = f"http://{SERVICE}:{service_port}"
    result = run_cli(
        "call", "GetMobileConsentText", base_url=base_url,
        VERIF_PROXY=proxy_url(proxy_port),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # On the command line a password would show in every process list.
    refused = run_cli(
        *("call", "GetMobileConsentText", "--proxy", proxy_url(proxy_port)),
        base_url=base_url,
    )
    assert refused.returncode == 2
    assert "--proxy" in refused.stderr
    assert "VERIF_PROXY" in refused.stderr
    assert_no_proxy_password(refused.stdout, refused.stderr)
    # Without credentials the proxy says 407: a one-line ProxyError.
    bare = run_cli(
        *("call", "GetMobileConsentText", "--proxy", f"http://127.0.0.1:{proxy_port}"),
        base_url=base_url,
    )
    assert bare.returncode == 1
    assert "ProxyError: " in bare.stderr
    assert "407" in bare.stderr
    assert len(proxy.heads) == 2


def test_a_refusing_proxy_is_one_line_without_its_password(
    service_port: int, proxy: ForwardProxy, proxy_port: int
) -> None:
    # A proxy that echoes its password in its refusal of the tunnel.
    proxy.refuse = b"403 " + PROXY_PASSWORD.encode()
    result = run_cli(
        *("call", "SecureLink_SecurityCode_HasBeenVerified", "RequestId=4294967297", "-v"),
        base_url=f"https://{SERVICE}:{service_port}",
        HTTPS_PROXY=proxy_url(proxy_port),
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("verif-client: ProxyError: ")
    assert f"http://127.0.0.1:{proxy_port}" in last
    assert "403 '***'" in last
    assert len(proxy.heads) == 4  # refused before anything reached the service: retried
    assert_no_proxy_password(result.stdout, result.stderr)


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates(service_name="127.0.0.1")


@pytest.fixture(scope="module")
def client_files(
    certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cli-cert")
    paths = {name: folder / f"{name}.pem" for name in ("ca", "cert", "key")}
    certificates.ca.cert_pem.write_to_path(str(paths["ca"]))
    certificates.client.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    certificates.client.private_key_pem.write_to_path(str(paths["key"]))
    return paths


def test_call_with_a_client_certificate(
    service_port: int, certificates: Certificates, client_files: dict[str, Path]
) -> None:
    context = certificates.server_context(require_client_cert=True)
    with tls_front(context, service_port) as port:
        base_url = f"https://127.0.0.1:{port}"
        trust = {"SSL_CERT_FILE": str(client_files["ca"])}
        flags = run_cli(
            *("call", "GetMobileConsentText"),
            *("--client-cert", str(client_files["cert"]), "--client-key", str(client_files["key"])),
            base_url=base_url,
            **trust,
        )
        assert flags.returncode == 0, flags.stderr
        from_env = run_cli(
            "call", "GetMobileConsentText", base_url=base_url,
            VERIF_CLIENT_CERT=str(client_files["cert"]), VERIF_CLIENT_KEY=str(client_files["key"]),
            **trust,
        )  # fmt: skip
        assert from_env.returncode == 0, from_env.stderr
        without = run_cli("call", "GetMobileConsentText", base_url=base_url, **trust)
        assert without.returncode == 1
        assert "client certificate" in without.stderr
        assert "--client-cert" in without.stderr
        assert "Traceback" not in without.stderr


def test_a_missing_client_certificate_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(
        *("call", "GetMobileConsentText", "--client-cert", str(tmp_path / "none.pem")),
        base_url="https://127.0.0.1:1",
    )
    assert result.returncode == 2
    assert "--client-cert" in result.stderr
    assert "none.pem" in result.stderr
    key_alone = run_cli(
        *("call", "GetMobileConsentText", "--client-key", str(tmp_path / "key.pem")),
        base_url="https://127.0.0.1:1",
    )
    assert key_alone.returncode == 2
    assert "--client-key: give the certificate too" in key_alone.stderr
