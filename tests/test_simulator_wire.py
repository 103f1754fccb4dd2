"""The simulator's answers against hand-written XML, and read back by our codecs.

The expected documents below are written out by hand from the service notes
(ASMX's layout), so a mistake shared by the simulator's writer and the client's
reader cannot hide behind a round trip.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import httpx
import pytest
from _sim_helpers import (
    CONSENT,
    EP,
    LOCATION,
    NS,
    REVOKE,
    SEND,
    UPDATE,
    VERIFIED,
    c14n,
    soap,
)

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig
from verif_client.simulator._wire import dotnet_double

pytestmark = pytest.mark.anyio

ENV11 = (
    '<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns:xsd="http://www.w3.org/2001/XMLSchema"><soap:Body>'
)
ENV12 = ENV11.replace(
    "http://schemas.xmlsoap.org/soap/envelope/", "http://www.w3.org/2003/05/soap-envelope"
)
END = "</soap:Body></soap:Envelope>"
DECL = '<?xml version="1.0" encoding="utf-8"?>'
FIRST_ID = 4294967297


@pytest.fixture
def sim() -> Simulator:
    return Simulator(config=SimulatorConfig(script=Script.manual()))


@pytest.fixture
async def client(sim: Simulator) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=sim)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        yield http


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5, "1.5"),
        (-97.123456789012337, "-97.123456789012337"),
        (1e-05, "1E-05"),
        (1e15, "1E+15"),
        (1e14, "100000000000000"),
        (3.9999999999999996, "3.9999999999999996"),
        (0.0001, "0.0001"),
        (123.0, "123"),
        (math.inf, "INF"),
        (-math.inf, "-INF"),
        (math.nan, "NaN"),
        (0.1, "0.1"),
    ],
)
def test_doubles_are_written_in_the_dotnet_round_trip_form(value: float, text: str) -> None:
    assert dotnet_double(value) == text


async def test_soap11_send_request_matches_hand_written_xml(client: httpx.AsyncClient) -> None:
    response = await soap(
        client, SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"}
    )
    expected = (
        f'{DECL}{ENV11}<{SEND}Response xmlns="{NS}"><{SEND}Result>'
        f"<SecureLinkRequestId>{FIRST_ID}</SecureLinkRequestId>"
        f"</{SEND}Result></{SEND}Response>{END}"
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/xml; charset=utf-8"
    # Byte for byte: ASMX writes SOAP on one line, nulls left out, no header.
    assert response.text == expected


async def test_soap12_pending_verification_is_nil(client: httpx.AsyncClient) -> None:
    sent = await soap(client, SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"})
    assert sent.status_code == 200
    response = await soap(client, VERIFIED, {"RequestId": str(FIRST_ID)}, version="1.2")
    expected = (
        f'{DECL}{ENV12}<{VERIFIED}Response xmlns="{NS}"><{VERIFIED}Result>'
        f'<Verified xsi:nil="true" /></{VERIFIED}Result></{VERIFIED}Response>{END}'
    )
    assert response.headers["content-type"] == "application/soap+xml; charset=utf-8"
    assert c14n(response.content) == c14n(expected)
    assert b'<Verified xsi:nil="true" />' in response.content


async def test_http_get_declined_and_unknown_ids(client: httpx.AsyncClient, sim: Simulator) -> None:
    await soap(client, SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"})
    sim.decline(FIRST_ID)
    response = await client.get(f"{EP}/{VERIFIED}", params={"RequestId": str(FIRST_ID)})
    expected = (
        f"{DECL}\r\n<SecureLinkCodeVerificationResult "
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns="{NS}">\r\n'
        "  <Verified>false</Verified>\r\n</SecureLinkCodeVerificationResult>"
    )
    assert response.text == expected  # XmlSerializer's indentation, CRLF
    unknown = await client.get(f"{EP}/{VERIFIED}", params={"RequestId": "7"})
    assert c14n(unknown.content, strip=True) == c14n(
        f'<SecureLinkCodeVerificationResult xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xmlns="{NS}"><Verified xsi:nil="true" />'
        "<ErrorMessage>Invalid SecureLink RequestID</ErrorMessage>"
        "</SecureLinkCodeVerificationResult>",
        strip=True,
    )


async def test_soap11_shared_location_with_special_values(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    await soap(client, SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"})
    sim.share_location(
        FIRST_ID,
        vc.Location(
            latitude=math.inf,
            longitude=-97.123456789012337,
            accuracy_radius=1e-05,
            altitude=math.nan,
            altitude_accuracy=1e15,
            address="Rue <Haute> & Fils \u00e9\U0001f3e0",
            city="",
            distance=None,
        ),
    )
    response = await soap(client, LOCATION, {"RequestId": str(FIRST_ID)})
    expected = (
        f'{DECL}{ENV11}<{LOCATION}Response xmlns="{NS}"><{LOCATION}Result><LocationResult>'
        "<Latitude>INF</Latitude><Longitude>-97.123456789012337</Longitude>"
        "<AccuracyRadius>1E-05</AccuracyRadius><Altitude>NaN</Altitude>"
        "<AltitudeAccuracy>1E+15</AltitudeAccuracy>"
        "<Address>Rue &lt;Haute&gt; &amp; Fils \u00e9\U0001f3e0</Address><City />"
        '<Distance xsi:nil="true" /></LocationResult>'
        f"</{LOCATION}Result></{LOCATION}Response>{END}"
    )
    assert response.text == expected


async def test_http_post_pending_location_has_no_location_result(client: httpx.AsyncClient) -> None:
    await soap(client, SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"})
    response = await client.post(f"{EP}/{LOCATION}", data={"RequestId": str(FIRST_ID)})
    assert response.headers["content-type"] == "text/xml; charset=utf-8"
    assert c14n(response.content, strip=True) == c14n(
        f'<SecureLinkLocationResult xmlns="{NS}"><ErrorMessage>Location not available for this '
        "SecureLink RequestID</ErrorMessage></SecureLinkLocationResult>",
        strip=True,
    )


async def test_scalar_results_in_soap_and_bare_form(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    sim.consent_text = 'A & B <c> "d" \u00e9'
    revoke = await soap(client, REVOKE, {"MobileNumber": "5551234567"})
    assert revoke.text == (
        f'{DECL}{ENV11}<{REVOKE}Response xmlns="{NS}"><{REVOKE}Result>true</{REVOKE}Result>'
        f"</{REVOKE}Response>{END}"
    )
    again = await client.get(f"{EP}/{REVOKE}", params={"MobileNumber": "5551234567"})
    assert again.text == f'{DECL}\r\n<boolean xmlns="{NS}">false</boolean>'
    text = await client.get(f"{EP}/{CONSENT}")
    assert text.text == f'{DECL}\r\n<string xmlns="{NS}">A &amp; B &lt;c&gt; "d" \u00e9</string>'
    soap_text = await soap(client, CONSENT, version="1.2")
    assert c14n(soap_text.content) == c14n(
        f'{ENV12}<{CONSENT}Response xmlns="{NS}"><{CONSENT}Result>A &amp; B &lt;c&gt; "d" \u00e9'
        f"</{CONSENT}Result></{CONSENT}Response>{END}"
    )


async def test_faults_match_hand_written_xml(client: httpx.AsyncClient) -> None:
    wrong = await soap(client, SEND, {}, action='"urn:nope"')
    assert wrong.status_code == 500
    assert wrong.headers["content-type"] == "text/xml; charset=utf-8"
    assert c14n(wrong.content) == c14n(
        f"{ENV11}<soap:Fault><faultcode>soap:Client</faultcode><faultstring>Server did not "
        "recognize the value of HTTP Header SOAPAction: urn:nope.</faultstring><detail />"
        f"</soap:Fault>{END}"
    )
    bad_long = await soap(client, VERIFIED, {"RequestId": "abc"}, version="1.2")
    assert bad_long.status_code == 500
    assert bad_long.headers["content-type"] == "application/soap+xml; charset=utf-8"
    reason = (
        "Server was unable to read request. ---&gt; There is an error in XML document (1, 1). "
        "---&gt; Input string was not in a correct format."
    )
    assert c14n(bad_long.content) == c14n(
        f"{ENV12}<soap:Fault><soap:Code><soap:Value>soap:Sender</soap:Value></soap:Code>"
        f'<soap:Reason><soap:Text xml:lang="en">{reason}</soap:Text></soap:Reason>'
        f"<soap:Detail /></soap:Fault>{END}"
    )


# -- every operation x binding, read back by the client codecs -----------------

PARAMS: dict[str, dict[str, object]] = {
    SEND: {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Pay <ACME> \u00e9?"},
    VERIFIED: {"RequestId": FIRST_ID},
    LOCATION: {"RequestId": FIRST_ID},
    UPDATE: {"BadCheckId": 2**40 + 3, "CheckRejectReason": "Stop & pay"},
    REVOKE: {"MobileNumber": "5551234567"},
    CONSENT: {},
}


@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_every_operation_decodes_with_the_client_codecs(
    binding: vc.Binding, sim: Simulator, client: httpx.AsyncClient
) -> None:
    codec = vc.codec_for(binding, validate=False)  # let the simulator do the refusing
    credentials = vc.Credentials("user", "pass")

    async def call(operation: str, **override: object) -> object:
        params = {**PARAMS[operation], **override}
        if not binding.is_soap and operation == SEND:
            params["ConfirmationQuestion"] = "Pay ACME \u00e9?"
        request = codec.encode(operation, params, credentials=credentials)
        response = await client.request(
            request.method, request.path, headers=request.headers, content=request.body
        )
        return codec.decode(
            operation, response.status_code, response.headers.items(), response.content
        )

    assert await call(SEND) == vc.RequestResult(FIRST_ID)
    assert await call(SEND, PhoneNumber="12") == vc.RequestResult(
        0, "Invalid PhoneNumber: it must be 7 to 15 digits."
    )
    assert await call(VERIFIED) == vc.VerificationResult(None)
    assert await call(LOCATION) == vc.LocationResult(
        None, "Location not available for this SecureLink RequestID"
    )
    sim.verify(FIRST_ID)
    location = vc.Location(latitude=1e-05, longitude=-97.123456789012337, city="Z\u00fcrich")
    sim.share_location(FIRST_ID, location)
    assert await call(VERIFIED) == vc.VerificationResult(True)
    assert await call(LOCATION) == vc.LocationResult(location)
    assert await call(UPDATE) is True
    assert await call(UPDATE, BadCheckId=5) is False
    assert await call(REVOKE) is True
    assert await call(REVOKE) is False
    assert await call(CONSENT) == sim.consent_text
    assert sim.bad_checks[2**40 + 3] == "Stop & pay"
