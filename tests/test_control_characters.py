"""A control character in a string the service returns: .NET writes it as a
character reference ("&#x1;"), which XML 1.0 forbids. The client reads it back
as the character, in every binding, as the service meant it."""

from __future__ import annotations

import httpx
import pytest

import verif_client as vc
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio

NS = "http://api.giact.com/verificationservices/v5"
HEADERS = {"Content-Type": "text/xml; charset=utf-8"}


@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_a_control_character_from_the_simulator_reads_back_as_itself(
    verif_simulator: Simulator,
    verif_simulator_transport: httpx.ASGITransport,
    binding: vc.Binding,
) -> None:
    # The simulator writes it as the real stack does (its own test pins "&#x1;").
    verif_simulator.consent_text = "a\x01b\x1fc\td\x0be"
    async with vc.VerificationClient(
        "http://sim",
        username="user",
        password="pass",
        binding=binding,
        transport=verif_simulator_transport,
    ) as client:
        assert await client.get_mobile_consent_text() == "a\x01b\x1fc\td\x0be"


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("&#x1;", "\x01"),
        ("&#X1f;", "\x1f"),
        ("&#x001;", "\x01"),
        ("&#8;", "\x08"),
        ("&#0;", "\x00"),
        ("&#x41;", "A"),
        ("&#65;", "A"),
        ("&#x9;", "\t"),
        ("&#xe9;", "\u00e9"),
    ],
)
def test_character_references_in_a_bare_answer(reference: str, expected: str) -> None:
    body = f'<?xml version="1.0" encoding="utf-8"?>\r\n<string xmlns="{NS}">x{reference}y</string>'
    decoded = vc.codec_for(vc.Binding.HTTP_GET).decode(
        vc.GET_MOBILE_CONSENT_TEXT, 200, HEADERS, body.encode()
    )
    assert decoded == f"x{expected}y"


def test_a_control_reference_inside_a_soap_error_message() -> None:
    body = (
        '<?xml version="1.0" encoding="utf-8"?><soap:Envelope '
        'xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
        f'<GetMobileConsentTextResponse xmlns="{NS}">'
        "<GetMobileConsentTextResult>line&#x1;two&#x2;</GetMobileConsentTextResult>"
        "</GetMobileConsentTextResponse></soap:Body></soap:Envelope>"
    )
    decoded = vc.codec_for(vc.Binding.SOAP11).decode(
        vc.GET_MOBILE_CONSENT_TEXT, 200, HEADERS, body.encode()
    )
    assert decoded == "line\x01two\x02"


def test_a_raw_control_byte_is_still_refused() -> None:
    # The service never writes the raw byte: it is not well-formed XML.
    body = f'<?xml version="1.0" encoding="utf-8"?><string xmlns="{NS}">a\x01b</string>'
    with pytest.raises(vc.DecodeError):
        vc.codec_for(vc.Binding.HTTP_GET).decode(
            vc.GET_MOBILE_CONSENT_TEXT, 200, HEADERS, body.encode()
        )
