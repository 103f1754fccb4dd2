"""Proxies: the pool through a forward proxy of the test's own, and each promise attacked.

The service is reached by a name (service.test) that only the proxy resolves,
so a call that works went through it; the proxy logs every head it was sent.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.tls import TLSListener
from proxysupport import (
    PROXY_PASSWORD,
    PROXY_USER,
    SERVICE,
    Certificates,
    ForwardProxy,
    forward_proxy,
    proxy_url,
    simulator_server,
    without_proxy_variables,
)
from relsupport import PASSWORD, USER, WITH_UVLOOP, drain
from test_transport_bad_peers import GUARD, NOT_VERIFIED, Wire, http_response, raw_server

import verif_client as vc
from verif_client._transport._proxy import choose_proxy
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio

FAST = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=10)


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxy_variables(monkeypatch)


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates()


@pytest.fixture
def sim() -> Simulator:
    return Simulator(credentials=(USER, PASSWORD))


@pytest.fixture
async def https_port(certificates: Certificates, sim: Simulator) -> AsyncIterator[int]:
    async with simulator_server(sim, certificates.server_context()) as port:
        yield port


@pytest.fixture
def proxy() -> ForwardProxy:
    return ForwardProxy()


@pytest.fixture
async def proxy_port(proxy: ForwardProxy) -> AsyncIterator[int]:
    async with forward_proxy(proxy) as port:
        yield port


def client(base_url: str, **options: Any) -> vc.VerificationClient:
    options.setdefault("retry", FAST)
    return vc.VerificationClient(base_url, username=USER, password=PASSWORD, **options)


async def test_https_proxy_from_the_environment_tunnels_with_tls_to_the_service(
    monkeypatch: pytest.MonkeyPatch,
    certificates: Certificates,
    https_port: int,
    proxy: ForwardProxy,
    proxy_port: int,
    sim: Simulator,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy_url(proxy_port))
    async with client(f"https://{SERVICE}:{https_port}", verify=certificates.trusting()) as c:
        with anyio.fail_after(GUARD):
            for _ in range(3):
                assert await c.get_mobile_consent_text() == sim.consent_text
    # One tunnel, reused; asked for by the service's name, with the proxy's credentials.
    assert proxy.tunnels == 1
    assert len(proxy.heads) == 1
    line, *headers = proxy.heads[0].split(b"\r\n")
    assert line == f"CONNECT {SERVICE}:{https_port} HTTP/1.1".encode()
    assert f"Host: {SERVICE}:{https_port}".encode() in headers
    assert any(h.startswith(b"Proxy-Authorization: Basic ") for h in headers)
    # TLS made with the service by its name, inside the tunnel.
    assert certificates.sni[-1] == SERVICE
    # Nothing of the service's traffic is readable to the proxy: no password in its heads.
    assert PASSWORD.encode() not in b"".join(proxy.heads)
    assert len(sim.requests) == 3


async def test_tls_inside_the_tunnel_is_verified_against_the_services_name(
    monkeypatch: pytest.MonkeyPatch, sim: Simulator, proxy_port: int
) -> None:
    # A certificate good for the proxy's address (127.0.0.1) but not for the
    # service's name: a client verifying against the proxy would accept it.
    other = Certificates(service_name="other.test")
    async with simulator_server(sim, other.server_context()) as port:
        monkeypatch.setenv("https_proxy", proxy_url(proxy_port))
        async with client(f"https://{SERVICE}:{port}", verify=other.trusting()) as c:
            with anyio.fail_after(GUARD), pytest.raises(vc.TransportError, match=r"(?i)hostname"):
                await c.get_mobile_consent_text()
    assert sim.requests == []


async def test_plain_http_goes_to_the_proxy_in_absolute_form(
    monkeypatch: pytest.MonkeyPatch, proxy: ForwardProxy, proxy_port: int, sim: Simulator
) -> None:
    async with simulator_server(sim) as port:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(proxy_port))
        async with client(f"http://{SERVICE}:{port}") as c:
            with anyio.fail_after(GUARD):
                assert await c.get_mobile_consent_text() == sim.consent_text
                sent = await c.send_confirmation_sms("5125550100", "Is this you?")
    assert sent.request_id
    line = f"POST http://{SERVICE}:{port}{vc.ENDPOINT_PATH} HTTP/1.1".encode()
    assert [head.split(b"\r\n")[0] for head in proxy.heads] == [line, line]
    assert all(b"\r\nProxy-Authorization: Basic " in head for head in proxy.heads)
    assert len(sim.secure_links) == 1


@pytest.mark.parametrize(
    "refusal", [b"407 Proxy Authentication Required", b"403 Forbidden", b"502 Bad Gateway"]
)
async def test_a_refused_tunnel_is_a_proxy_error_and_a_send_is_retried_as_never_sent(
    https_port: int, proxy: ForwardProxy, proxy_port: int, sim: Simulator, refusal: bytes
) -> None:
    proxy.refuse = refusal
    async with client(f"https://{SERVICE}:{https_port}", proxy=proxy_url(proxy_port)) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError) as caught:
            await c.send_confirmation_sms("5125550100", "Is this you?")
    error = caught.value
    assert not isinstance(error, vc.DeliveryUnknownError)
    assert error.status_code == int(refusal[:3])
    assert error.proxy == f"http://127.0.0.1:{proxy_port}"
    assert f"http://127.0.0.1:{proxy_port}" in str(error)
    assert refusal[:3].decode() in str(error)
    # Known not sent: tried again up to the policy, and the service saw nothing.
    assert len(proxy.heads) == FAST.attempts
    assert sim.requests == []


async def test_wrong_proxy_credentials_are_a_407_proxy_error(
    https_port: int, proxy_port: int
) -> None:
    url = proxy_url(proxy_port, password="not-" + PROXY_PASSWORD)
    async with client(f"https://{SERVICE}:{https_port}", proxy=url) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError, match="407") as caught:
            await c.get_mobile_consent_text()
    assert "credentials" in str(caught.value)
    assert PROXY_PASSWORD not in str(caught.value)


async def test_a_407_to_plain_http_is_a_proxy_error(proxy_port: int, sim: Simulator) -> None:
    async with simulator_server(sim) as port:
        url = proxy_url(proxy_port, user="someone-else")
        async with client(f"http://{SERVICE}:{port}", proxy=url) as c:
            with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError, match="407") as caught:
                await c.get_mobile_consent_text()
    assert caught.value.status_code == 407
    assert sim.requests == []


@pytest.mark.parametrize(
    ("misbehave", "words"), [("close", "closed the connection"), ("garbage", "not HTTP")]
)
async def test_a_proxy_that_hangs_up_or_sends_garbage_is_a_proxy_error(
    https_port: int, proxy: ForwardProxy, proxy_port: int, misbehave: str, words: str
) -> None:
    proxy.misbehave = misbehave
    async with client(f"https://{SERVICE}:{https_port}", proxy=proxy_url(proxy_port)) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError, match=words) as caught:
            await c.send_confirmation_sms("5125550100", "Is this you?")
    assert caught.value.status_code is None
    assert len(proxy.heads) == FAST.attempts


async def test_a_proxy_nobody_listens_on_is_a_proxy_error() -> None:
    async with raw_server(drain) as port:
        pass  # the port is free again: nobody listens there
    async with client(f"https://{SERVICE}", proxy=proxy_url(port)) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError) as caught:
            await c.get_mobile_consent_text()
    # The proxy as host and port (never its password), and anyio's words for the refusal.
    assert caught.value.proxy == f"http://127.0.0.1:{port}"
    assert str(caught.value).endswith(
        f"cannot connect to the proxy http://127.0.0.1:{port}: All connection attempts failed"
    )


async def test_a_tunnel_closed_mid_request_leaves_a_send_delivery_unknown(
    certificates: Certificates, proxy: ForwardProxy, proxy_port: int
) -> None:
    arrived = anyio.Event()

    async def holding(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await drain(receive)
        arrived.set()
        await anyio.sleep_forever()

    proxy.cut = anyio.Event()
    service = simulator_server(holding, certificates.server_context())  # type: ignore[arg-type]
    async with (
        service as port,
        client(
            f"https://{SERVICE}:{port}", proxy=proxy_url(proxy_port), verify=certificates.trusting()
        ) as c,
    ):

        async def cut_when_arrived() -> None:
            await arrived.wait()
            assert proxy.cut is not None
            proxy.cut.set()

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                tg.start_soon(cut_when_arrived)
                with pytest.raises(vc.DeliveryUnknownError) as caught:
                    await c.send_confirmation_sms("5125550100", "Is this you?")
    assert not isinstance(caught.value, vc.ProxyError)
    assert proxy.tunnels == 1


async def test_no_proxy_sends_a_matching_host_direct(
    monkeypatch: pytest.MonkeyPatch, sim: Simulator, proxy: ForwardProxy, proxy_port: int
) -> None:
    async with simulator_server(sim) as port:
        monkeypatch.setenv("HTTP_PROXY", proxy_url(proxy_port))
        monkeypatch.setenv("NO_PROXY", f"example.com, 127.0.0.1:{port}")
        async with client(f"http://127.0.0.1:{port}") as c:
            assert await c.get_mobile_consent_text() == sim.consent_text
        monkeypatch.setenv("NO_PROXY", "127.0.0.1:1")  # another port: a miss
        async with client(f"http://127.0.0.1:{port}") as c:
            assert await c.get_mobile_consent_text() == sim.consent_text
    assert len(proxy.heads) == 1
    assert len(sim.requests) == 2


async def test_trust_env_false_and_an_explicit_proxy_ignore_the_environment(
    monkeypatch: pytest.MonkeyPatch, sim: Simulator, proxy: ForwardProxy, proxy_port: int
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    monkeypatch.setenv("NO_PROXY", "*")
    async with simulator_server(sim) as port:
        async with client(f"http://127.0.0.1:{port}", trust_env=False) as c:
            assert await c.get_mobile_consent_text()
        # proxy= wins over the environment, NO_PROXY included (httpx does the same).
        async with client(f"http://127.0.0.1:{port}", proxy=proxy_url(proxy_port)) as c:
            assert await c.get_mobile_consent_text()
    assert len(proxy.heads) == 1


async def test_the_proxy_password_is_in_no_repr_log_or_error(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    https_port: int,
    proxy: ForwardProxy,
    proxy_port: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy.refuse = b"407 " + PROXY_PASSWORD.encode()  # a proxy that echoes it back
    monkeypatch.setenv("HTTPS_PROXY", proxy_url(proxy_port))
    errors: list[BaseException] = []
    async with client(f"https://{SERVICE}:{https_port}") as c:
        shown = [repr(c), repr(c._proxy), str(vars(c))]
        for call in (c.get_mobile_consent_text, lambda: c.revoke_mobile_consent("5125550100")):
            with pytest.raises(vc.ProxyError) as caught:
                await call()
            errors.append(caught.value)
    shown += [str(e) for e in errors] + [repr(e) for e in errors]
    shown += [repr(e.args) for e in errors] + [caplog.text]
    assert "***" in str(errors[0])
    for text in shown:
        assert PROXY_PASSWORD not in text
        assert "Pr0xy" not in text


def test_an_unsupported_or_broken_proxy_url_fails_at_construction_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match="only http://") as caught:
        vc.VerificationClient("https://x.test", proxy=f"socks5://u:{PROXY_PASSWORD}@h:1080")
    assert PROXY_PASSWORD not in str(caught.value)
    monkeypatch.setenv("ALL_PROXY", f"http://u:{PROXY_PASSWORD}@h:port")
    with pytest.raises(ValueError, match="ALL_PROXY") as caught:
        vc.VerificationClient("https://x.test")
    assert PROXY_PASSWORD not in str(caught.value)
    with pytest.raises(ValueError, match="give them to the http_client"):
        vc.VerificationClient(
            "https://x.test", proxy="http://h:1", transport=Simulator().transport()
        )


def proxied(environ: dict[str, str], base_url: str = "https://api.example.com") -> str | None:
    chosen = choose_proxy(base_url, None, trust_env=True, environ=environ)
    return None if chosen is None else chosen.shown


@pytest.mark.parametrize(
    ("environ", "base_url", "expected"),
    [
        ({"HTTPS_PROXY": "http://p:3128"}, "https://api.example.com", "http://p:3128"),
        ({"HTTPS_PROXY": "p:3128"}, "https://api.example.com", "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, "http://api.example.com", None),
        ({"HTTP_PROXY": "http://q:8080"}, "http://api.example.com", "http://q:8080"),
        ({"ALL_PROXY": "http://a:1"}, "http://api.example.com", "http://a:1"),
        ({"all_proxy": "http://a:1", "https_proxy": "http://s:2"}, "https://x.com", "http://s:2"),
        # Lower case first, as urllib (and so httpx) reads them; an empty one still wins.
        (
            {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"},
            "https://x.com",
            "http://low:1",
        ),
        ({"https_proxy": "", "HTTPS_PROXY": "http://up:2"}, "https://x.com", None),
        ({"HTTPS_PROXY": "http://u:pw@p"}, "https://x.com", "http://p:80"),
    ],
)
def test_which_proxy_the_environment_gives(
    environ: dict[str, str], base_url: str, expected: str | None
) -> None:
    assert proxied(environ, base_url) == expected


@pytest.mark.parametrize(
    ("no_proxy", "base_url", "bypassed"),
    [
        ("*", "https://api.example.com", True),
        ("api.example.com", "https://api.example.com", True),
        ("example.com", "https://api.example.com", True),
        ("example.com", "https://example.com", True),
        ("EXAMPLE.COM", "https://api.example.com", True),
        (".example.com", "https://api.example.com", True),
        (".example.com", "https://example.com", False),
        ("xample.com", "https://api.example.com", False),
        ("other.com, example.com", "https://api.example.com", True),
        ("example.com:443", "https://api.example.com", True),
        ("example.com:8443", "https://api.example.com", False),
        ("example.com:8443", "https://api.example.com:8443", True),
        ("10.0.0.1", "https://10.0.0.1", True),
        ("10.0.0.1", "https://10.0.0.12", False),
        ("[::1]", "https://[::1]:8443", True),
        ("[::1]:8443", "https://[::1]:443", False),
        ("localhost", "https://localhost", True),
        ("", "https://api.example.com", False),
        ("other.com", "https://api.example.com", False),
    ],
)
def test_no_proxy_hosts_domains_star_and_ports(
    no_proxy: str, base_url: str, bypassed: bool
) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        environ = {"HTTPS_PROXY": "http://p:3128", name: no_proxy}
        assert (proxied(environ, base_url) is None) is bypassed, (name, no_proxy, base_url)


def test_a_proxy_user_and_password_with_reserved_characters_are_decoded() -> None:
    chosen = choose_proxy("https://x.com", "http://us%40er:p%3Aw%40rd@p:1", trust_env=False)
    assert chosen is not None
    assert chosen.password == "p:w@rd"
    assert chosen.headers == (("Proxy-Authorization", "Basic dXNAZXI6cDp3QHJk"),)
    assert PROXY_USER not in repr(chosen)


async def test_a_peer_echoing_the_proxy_authorization_header_is_scrubbed() -> None:
    # A proxy that forwards its own credentials, to a service that echoes the request.
    async def echo(stream: anyio.abc.ByteStream) -> None:
        request = await Wire(stream).request()
        assert request is not None
        head = request.partition(b"\r\n\r\n")[0].replace(b"\r\n", b" | ")
        await stream.send(http_response(head, status=b"500 Internal Server Error"))

    async with raw_server(echo) as port:
        url = proxy_url(port)
        async with client(f"http://{SERVICE}", proxy=url, retry=vc.NO_RETRY) as c:
            with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError) as caught:
                await c.get_mobile_consent_text()
    token = base64.b64encode(f"{PROXY_USER}:{PROXY_PASSWORD}".encode()).decode()
    text = str(caught.value) + repr(caught.value.args) + caught.value.server_message
    assert "Proxy-Authorization: Basic ***" in text
    assert token not in text
    assert PROXY_PASSWORD not in text


async def test_a_base_url_that_cannot_go_in_a_request_line_is_never_sent(
    proxy: ForwardProxy, proxy_port: int
) -> None:
    async with client("http://service .test", proxy=proxy_url(proxy_port)) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError, match="InvalidURL"):
            await c.get_mobile_consent_text()
    assert proxy.heads == []


async def test_the_environment_is_read_at_construction_only(
    monkeypatch: pytest.MonkeyPatch, sim: Simulator
) -> None:
    async with simulator_server(sim) as port:
        c = client(f"http://127.0.0.1:{port}")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # nobody listens there
        async with c:
            assert await c.get_mobile_consent_text() == sim.consent_text


@pytest.mark.parametrize("host", [SERVICE, "[::1]"])
async def test_an_https_base_url_without_a_port_tunnels_to_port_443(
    proxy: ForwardProxy, proxy_port: int, host: str
) -> None:
    # An IPv6 address keeps its brackets in the CONNECT target (the proxy
    # refuses here, so nothing is dialled).
    proxy.refuse = b"403 Forbidden"
    async with client(f"https://{host}", proxy=proxy_url(proxy_port), retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError):
            await c.get_mobile_consent_text()
    (head,) = proxy.heads
    assert head.split(b"\r\n")[0] == f"CONNECT {host}:443 HTTP/1.1".encode()


async def test_the_service_behind_a_tunnel_never_gets_the_proxy_credentials(
    certificates: Certificates, proxy: ForwardProxy, proxy_port: int
) -> None:
    heads: list[bytes] = []

    async def service(stream: anyio.abc.ByteStream) -> None:
        request = await Wire(stream).request()
        if request is not None:
            heads.append(request.partition(b"\r\n\r\n")[0])
            await stream.send(NOT_VERIFIED)

    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = TLSListener(tcp, certificates.server_context(), standard_compatible=False)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, service)
        url = f"https://{SERVICE}:{port}"
        options = {"verify": certificates.trusting(), "retry": vc.NO_RETRY}
        async with client(url, proxy=proxy_url(proxy_port), **options) as c:
            with anyio.fail_after(GUARD):
                assert (await c.has_been_verified(4294967297)).verified is False
        tg.cancel_scope.cancel()
    (head,) = heads
    assert b"proxy-authorization" not in head.lower()
    assert proxy.tunnels == 1
