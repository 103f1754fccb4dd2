"""A base_url that already ends in the endpoint path is taken as is; one that
names something else is refused when the client is built, naming base_url."""

from __future__ import annotations

import contextlib

import httpx
import pytest
from relsupport import WITH_UVLOOP

import verif_client as vc
from verif_client.simulator import Simulator, serve

EP = vc.ENDPOINT_PATH
LOGIN = {"username": "tester", "password": "tester-password"}


@pytest.mark.anyio
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize(
    "suffix", ["", "/", EP, EP + "/", EP.upper(), "/VerificationServices/V5/InquiriesWS-5-8.asmx"]
)
@pytest.mark.parametrize("where", ["in-process", "loopback"])
async def test_the_endpoint_path_is_never_added_twice(
    binding: vc.Binding, suffix: str, where: str
) -> None:
    simulator = Simulator()
    if where == "in-process":
        transport = httpx.ASGITransport(app=simulator)
        async with vc.VerificationClient(
            "http://sim" + suffix, binding=binding, transport=transport, **LOGIN
        ) as client:
            assert await client.get_mobile_consent_text()
    else:
        async with (
            serve(simulator) as server,
            vc.VerificationClient(server.base_url + suffix, binding=binding, **LOGIN) as client,
        ):
            assert await client.get_mobile_consent_text()
    (call,) = simulator.calls()
    assert call.path.lower().count("inquiriesws-5-8.asmx") == 1
    assert call.status == 200


@pytest.mark.parametrize(
    "base_url",
    [
        "https://api.giact.com" + EP + "?WSDL",
        "https://api.giact.com/verificationservices/v5/InquiriesWS-5-9.asmx",
        "https://api.giact.com/#top",
        "http://[::1",
    ],
)
def test_a_base_url_naming_something_else_is_refused_at_construction(base_url: str) -> None:
    with pytest.raises(ValueError, match=r"^base_url: ") as caught:
        vc.VerificationClient(base_url)
    assert base_url in str(caught.value)


def test_a_custom_endpoint_path_is_recognised_too() -> None:
    client = vc.VerificationClient("http://h/svc/Other.asmx", endpoint_path="/svc/Other.asmx")
    assert client.base_url == "http://h"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("http://127.0.0.1:99999", "InvalidURL: Port out of range 0-65535"),
        (
            "ftp://127.0.0.1",
            "UnsupportedProtocol: base_url 'ftp://127.0.0.1' must start with http:// or https://",
        ),
        ("http://:80", "InvalidURL: base_url 'http://:80' names no host"),
    ],
)
async def test_a_base_url_no_connection_can_be_made_to_fails_an_sms_as_never_sent(
    base_url: str, problem: str
) -> None:
    # Accepted at construction, refused by the connection pool before any
    # connection: an SMS is a plain transport error naming the problem, never
    # "delivery unknown".
    async with vc.VerificationClient(base_url, retry=vc.NO_RETRY, **LOGIN) as client:
        with pytest.raises(vc.TransportError) as caught:
            await client.send_confirmation_sms("5125550100", "Is this you?")
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert str(caught.value) == f"SecureLink_Confirmation_SendRequestViaSms: {problem}"


@pytest.mark.anyio
async def test_an_http_url_without_a_port_is_dialled_on_port_80() -> None:
    """The default port is the scheme's: 80 for http (443 for https), never another."""
    simulator = Simulator()
    async with contextlib.AsyncExitStack() as stack:
        try:
            server = await stack.enter_async_context(serve(simulator, port=80))
        except OSError as exc:  # not root, or port 80 taken on this machine
            pytest.skip(f"port 80 cannot be listened on here: {exc}")
        client = await stack.enter_async_context(vc.VerificationClient("http://127.0.0.1", **LOGIN))
        assert server.port == 80
        assert await client.get_mobile_consent_text()
    (call,) = simulator.calls()
    assert call.status == 200


@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
@pytest.mark.anyio
async def test_a_host_name_is_resolved_and_dialled_on_every_event_loop() -> None:
    """On asyncio the loop's own connection (happy eyeballs asked for), on
    uvloop anyio's for a name (uvloop's cannot try a name's addresses in
    turn), on trio anyio's: each must reach the service by its name."""
    simulator = Simulator()
    async with (
        serve(simulator) as server,
        vc.VerificationClient(f"http://localhost:{server.port}", **LOGIN) as client,
    ):
        for _ in range(2):  # the second on the kept connection
            assert await client.get_mobile_consent_text()
    assert [call.status for call in simulator.calls()] == [200, 200]
