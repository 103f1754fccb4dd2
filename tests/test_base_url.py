"""A base_url that already ends in the endpoint path is taken as is; one that
names something else is refused when the client is built, naming base_url."""

from __future__ import annotations

import httpx
import pytest

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
