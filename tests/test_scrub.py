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

SEND = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
# Each has a character repr() writes differently: a backslash, both quotes, a tab.
PASSWORDS = ["Pa55\\never\\show-3b7e", "Pa&55<x>\"q'-never-show-9c1", "Pa55\tnever-show-5d2a"]


def references(text: str) -> str:
    return "".join(f"&#{ord(char)};" for char in text)


def echoing_in_the_request_id(binding: vc.Binding, password: str) -> Any:
    body = asmx.response(
        binding, SEND, f"<SecureLinkRequestId>{references(password)}</SecureLinkRequestId>"
    )

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
