"""A control character in a string the service returns: .NET writes it as a
character reference ("&#x1;"), which XML 1.0 forbids. The client reads it back
as the character, in every binding, as the service meant it."""

from __future__ import annotations

import httpx
import pytest
from _sim_helpers import CONSENT, EP, soap

import verif_client as vc
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio

NS = "http://api.giact.com/verificationservices/v5"
HEADERS = {"Content-Type": "text/xml; charset=utf-8"}


def client_over(transport: httpx.ASGITransport, binding: vc.Binding) -> vc.VerificationClient:
    """A client of the in-process simulator in ``binding``."""
    return vc.VerificationClient(
        "http://sim", username="user", password="pass", binding=binding, transport=transport
    )


@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_a_control_character_from_the_simulator_reads_back_as_itself(
    verif_simulator: Simulator,
    verif_simulator_transport: httpx.ASGITransport,
    binding: vc.Binding,
) -> None:
    # The simulator writes it as the real stack does (its own test pins "&#x1;").
    verif_simulator.consent_text = "a\x01b\x1fc\td\x0be"
    async with client_over(verif_simulator_transport, binding) as client:
        assert await client.get_mobile_consent_text() == "a\x01b\x1fc\td\x0be"


# ASMX writes every answer through XmlTextWriter (SoapServerProtocol.GetWriterForMessage for
# SOAP, XmlSerializer.Serialize(TextWriter) for HTTP GET/POST). Its encoder writes TAB, LF and
# CR as they are in element text (only an attribute gets "&#xD;"), and any other character XML
# 1.0 does not allow as "&#x" + upper-case hex + ";". XmlWriter's NewLineHandling.Entitize,
# which would write "&#xD;", is not what ASMX uses.
TRICKY = "a\rb\r\nc\nd\x01e\x1ff\tg\x0bh\x0ci\x7fj\x00k"
AS_ASMX_WRITES = b"a\rb\r\nc\nd&#x1;e&#x1F;f\tg&#xB;h&#xC;i\x7fj&#x0;k"
# An XML parser reads a raw CR, and a CR LF pair, as one LF (XML 1.0, 2.11): any client of
# the real service sees the same; the references come back as the characters.
AS_READ = "a\nb\nc\nd\x01e\x1ff\tg\x0bh\x0ci\x7fj\x00k"


async def _raw_answer(http: httpx.AsyncClient, binding: vc.Binding) -> bytes:
    if binding is vc.Binding.SOAP11:
        return (await soap(http, CONSENT)).content
    if binding is vc.Binding.SOAP12:
        return (await soap(http, CONSENT, version="1.2")).content
    if binding is vc.Binding.HTTP_GET:
        return (await http.get(f"{EP}/{CONSENT}")).content
    return (await http.post(f"{EP}/{CONSENT}", data={})).content


@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_cr_crlf_and_control_characters_go_out_as_asmx_writes_them_and_read_back(
    verif_simulator: Simulator,
    verif_simulator_transport: httpx.ASGITransport,
    binding: vc.Binding,
) -> None:
    verif_simulator.consent_text = TRICKY
    transport = verif_simulator_transport
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        raw = await _raw_answer(http, binding)
    soap_binding = binding in (vc.Binding.SOAP11, vc.Binding.SOAP12)
    element = f"{CONSENT}Result>" if soap_binding else f'string xmlns="{NS}">'
    closing = f"</{CONSENT}Result>" if soap_binding else "</string>"
    assert f"<{element}".encode() + AS_ASMX_WRITES + closing.encode() in raw
    async with client_over(verif_simulator_transport, binding) as client:
        assert await client.get_mobile_consent_text() == AS_READ


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
