"""A peer echoing our password in a shape no escaping rule predicts still never
gets it shown: here as numeric character references inside an element the
client reads as a number, so the error quotes the decoded text with ``repr()``.
"""

from __future__ import annotations

import traceback
from typing import Any

import anyio
import asmx
import httpx
import pytest

import verif_client as vc
from verif_client._scrub import Scrubber

SEND = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
# Each has a character repr() writes differently: a backslash, both quotes, a tab.
PASSWORDS = ["Pa55\\never\\show-3b7e", "Pa&55<x>\"q'-never-show-9c1", "Pa55\tnever-show-5d2a"]


def references(text: str) -> str:
    return "".join(f"&#{ord(char)};" for char in text)


def echoing_in_the_request_id(binding: vc.Binding, password: str) -> Any:
    body = asmx.response(
        binding, SEND, f"<SecureLinkRequestId>{references(password)}</SecureLinkRequestId>"
    )
    return answering(body)


def answering(body: bytes) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/xml; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def forms(secret: str) -> set[str]:
    """The secret as it could show: as is, and quoted by repr() (both 10-character pieces)."""
    shown = {secret, repr(secret)[1:-1], repr(secret)}
    return {form[i : i + 10] for form in shown for i in range(len(form) - 9)}


@pytest.mark.anyio
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("password", PASSWORDS, ids=["backslash", "quotes", "tab"])
async def test_a_password_echoed_as_character_references_never_shows_in_the_error(
    binding: vc.Binding, password: str
) -> None:
    transport = httpx.ASGITransport(app=echoing_in_the_request_id(binding, password))
    async with vc.VerificationClient(
        "http://echo", username="acme", password=password, binding=binding, transport=transport
    ) as client:
        with anyio.fail_after(30), pytest.raises(vc.DecodeError) as caught:
            await client.send_confirmation_sms("5551234567", "Did you ask to pay?")

    error = caught.value
    # The echo reached the message, masked: the test exercised the repr() path.
    assert str(error).endswith("'***' is not an xsd:long")
    shown = str(error) + repr(error) + repr(error.args) + "".join(traceback.format_exception(error))
    for piece in forms(password):
        assert piece not in shown


PASSWORD = "Pa55-zed-word-41c9"


@pytest.mark.anyio
async def test_a_password_echoed_into_a_valid_answer_is_masked_and_the_rest_kept() -> None:
    location = vc.get_operation("SecureLink_MobileLocation_GetResult")
    body = asmx.response(
        vc.Binding.SOAP11,
        location,
        "<LocationResult><Latitude>1.5</Latitude>"
        f"<Address>1 {PASSWORD} Street</Address><City>Austin</City></LocationResult>"
        f"<ErrorMessage>bad password {PASSWORD}, try again</ErrorMessage>",
    )
    transport = httpx.ASGITransport(app=answering(body))
    async with vc.VerificationClient(
        "http://echo", username="acme", password=PASSWORD, transport=transport
    ) as client:
        result = await client.get_mobile_location(4294967297)

    assert result.error_message == "bad password ***, try again"
    assert result.location is not None
    assert (result.location.address, result.location.city) == ("1 *** Street", "Austin")
    assert result.location.latitude == 1.5


@pytest.mark.anyio
async def test_a_secret_username_inside_the_password_leaves_no_piece_of_either() -> None:
    # Sorted by text, "zed" would be masked first, leaving "Pa55-***-word-41c9" to show.
    body = asmx.response(
        vc.Binding.SOAP11,
        SEND,
        f"<SecureLinkRequestId>0</SecureLinkRequestId>"
        f"<ErrorMessage>login zed:{PASSWORD} refused</ErrorMessage>",
    )
    transport = httpx.ASGITransport(app=answering(body))
    async with vc.VerificationClient(
        "http://echo",
        username="zed",
        password=PASSWORD,
        username_is_secret=True,
        transport=transport,
    ) as client:
        result = await client.send_confirmation_sms("5551234567", "Did you ask to pay?")

    assert result.error_message == "login ***:*** refused"


def test_an_answer_with_nothing_to_mask_is_returned_as_is_not_copied() -> None:
    result = vc.VerificationResult(verified=True, error_message="all fine")

    assert Scrubber([PASSWORD]).result(result) is result
