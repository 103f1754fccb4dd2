"""Golden requests: every operation in every binding, written by hand from seed 4.1.

The expected values below are literal text, never produced by the library.
SOAP bodies are compared as canonical XML (C14N) so that only insignificant
layout may differ; GET paths and POST bodies are compared byte for byte.
"""

from __future__ import annotations

from typing import NamedTuple

import asmx
import pytest
from lxml import etree

import verif_client as vc

CREDENTIALS = vc.Credentials("api-user", "p&ss<w0rd>")


class Golden(NamedTuple):
    params: dict[str, object]
    soap_action: str
    soap_body: str
    query: str
    form: str


GOLDEN: dict[str, Golden] = {
    "SecureLink_Confirmation_SendRequestViaSms": Golden(
        params={
            "PhoneNumber": "5551234567",
            "ConfirmationQuestion": "Pay Tom & Jerry $5 > 4? café 🎉",
        },
        soap_action=(
            '"http://api.giact.com/verificationservices/v5/'
            'SecureLink_Confirmation_SendRequestViaSms"'
        ),
        soap_body="""
            <SecureLink_Confirmation_SendRequestViaSms
                xmlns="http://api.giact.com/verificationservices/v5">
              <PhoneNumber>5551234567</PhoneNumber>
              <ConfirmationQuestion>Pay Tom &amp; Jerry $5 &gt; 4? café 🎉</ConfirmationQuestion>
            </SecureLink_Confirmation_SendRequestViaSms>""",
        query=(
            "PhoneNumber=5551234567&ConfirmationQuestion="
            "Pay%20Tom%20%26%20Jerry%20%245%20%3E%204%3F%20caf%C3%A9%20%F0%9F%8E%89"
        ),
        form=(
            "PhoneNumber=5551234567&ConfirmationQuestion="
            "Pay+Tom+%26+Jerry+%245+%3E+4%3F+caf%C3%A9+%F0%9F%8E%89"
        ),
    ),
    "SecureLink_SecurityCode_HasBeenVerified": Golden(
        params={"RequestId": 9223372036854775807},
        soap_action=(
            '"http://api.giact.com/verificationservices/v5/SecureLink_SecurityCode_HasBeenVerified"'
        ),
        soap_body="""
            <SecureLink_SecurityCode_HasBeenVerified
                xmlns="http://api.giact.com/verificationservices/v5">
              <RequestId>9223372036854775807</RequestId>
            </SecureLink_SecurityCode_HasBeenVerified>""",
        query="RequestId=9223372036854775807",
        form="RequestId=9223372036854775807",
    ),
    "SecureLink_MobileLocation_GetResult": Golden(
        params={"RequestId": 4294967297},
        soap_action=(
            '"http://api.giact.com/verificationservices/v5/SecureLink_MobileLocation_GetResult"'
        ),
        soap_body="""
            <SecureLink_MobileLocation_GetResult
                xmlns="http://api.giact.com/verificationservices/v5">
              <RequestId>4294967297</RequestId>
            </SecureLink_MobileLocation_GetResult>""",
        query="RequestId=4294967297",
        form="RequestId=4294967297",
    ),
    "UpdatePrivateBadCheckRejectReason": Golden(
        params={"CheckRejectReason": "NSF; R01 = insufficient funds", "BadCheckId": 1234567890123},
        soap_action='"http://api.giact.com/verificationservices/v5/UpdatePrivateBadCheckRejectReason"',
        soap_body="""
            <UpdatePrivateBadCheckRejectReason xmlns="http://api.giact.com/verificationservices/v5">
              <BadCheckId>1234567890123</BadCheckId>
              <CheckRejectReason>NSF; R01 = insufficient funds</CheckRejectReason>
            </UpdatePrivateBadCheckRejectReason>""",
        query="BadCheckId=1234567890123&CheckRejectReason=NSF%3B%20R01%20%3D%20insufficient%20funds",
        form="BadCheckId=1234567890123&CheckRejectReason=NSF%3B+R01+%3D+insufficient+funds",
    ),
    "RevokeMobileConsent": Golden(
        params={"MobileNumber": "15551234567"},
        soap_action='"http://api.giact.com/verificationservices/v5/RevokeMobileConsent"',
        soap_body="""
            <RevokeMobileConsent xmlns="http://api.giact.com/verificationservices/v5">
              <MobileNumber>15551234567</MobileNumber>
            </RevokeMobileConsent>""",
        query="MobileNumber=15551234567",
        form="MobileNumber=15551234567",
    ),
    "GetMobileConsentText": Golden(
        params={},
        soap_action='"http://api.giact.com/verificationservices/v5/GetMobileConsentText"',
        soap_body='<GetMobileConsentText xmlns="http://api.giact.com/verificationservices/v5"/>',
        query="",
        form="",
    ),
}

ENVELOPES = {
    vc.Binding.SOAP11: """<?xml version="1.0" encoding="utf-8"?>
        <soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">
          <soap:Header>
            <AuthenticationHeader xmlns="http://api.giact.com/verificationservices/v5">
              <ApiUsername>api-user</ApiUsername>
              <ApiPassword>p&amp;ss&lt;w0rd&gt;</ApiPassword>
            </AuthenticationHeader>
          </soap:Header>
          <soap:Body>{body}</soap:Body>
        </soap:Envelope>""",
    vc.Binding.SOAP12: """<?xml version="1.0" encoding="utf-8"?>
        <soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope">
          <soap:Header>
            <AuthenticationHeader xmlns="http://api.giact.com/verificationservices/v5">
              <ApiUsername>api-user</ApiUsername>
              <ApiPassword>p&amp;ss&lt;w0rd&gt;</ApiPassword>
            </AuthenticationHeader>
          </soap:Header>
          <soap:Body>{body}</soap:Body>
        </soap:Envelope>""",
}

PATH = "/verificationservices/v5/InquiriesWS-5-8.asmx"


def expected_request(binding: vc.Binding, golden: Golden, name: str) -> vc.HTTPRequest:
    if binding is vc.Binding.SOAP11:
        headers = {"content-type": "text/xml; charset=utf-8", "soapaction": golden.soap_action}
    elif binding is vc.Binding.SOAP12:
        headers = {"content-type": "application/soap+xml; charset=utf-8"}
    elif binding is vc.Binding.HTTP_POST:
        headers = {"content-type": "application/x-www-form-urlencoded"}
    else:
        headers = {}
    if binding.is_soap:
        body = ENVELOPES[binding].format(body=golden.soap_body).strip().encode()
        return vc.HTTPRequest("POST", PATH, tuple(headers.items()), body)
    if binding is vc.Binding.HTTP_GET:
        path = f"{PATH}/{name}?{golden.query}" if golden.query else f"{PATH}/{name}"
        return vc.HTTPRequest("GET", path, (), b"")
    return vc.HTTPRequest("POST", f"{PATH}/{name}", tuple(headers.items()), golden.form.encode())


def canonical(document: bytes) -> bytes:
    parser = etree.XMLParser(remove_blank_text=True)
    return etree.tostring(etree.fromstring(document, parser), method="c14n")


def test_the_golden_table_covers_every_operation() -> None:
    assert set(GOLDEN) == {op.name for op in vc.OPERATIONS}


@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
def test_encoded_request_matches_the_hand_written_one(
    binding: vc.Binding, operation: vc.Operation
) -> None:
    golden = GOLDEN[operation.name]
    expected = expected_request(binding, golden, operation.name)

    actual = vc.codec_for(binding).encode(operation, golden.params, credentials=CREDENTIALS)

    assert actual.method == expected.method
    assert actual.path == expected.path
    assert {k.lower(): v for k, v in actual.headers} == dict(expected.headers)
    assert len(actual.headers) == len(expected.headers), "a header is sent twice"
    if binding.is_soap:
        assert actual.body.startswith(b'<?xml version="1.0" encoding="utf-8"?>')
        assert canonical(actual.body) == canonical(expected.body)
    else:
        assert actual.body == expected.body


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_parameterless_operation_sends_an_empty_element_query_or_form(
    binding: vc.Binding,
) -> None:
    request = vc.codec_for(binding).encode("GetMobileConsentText", credentials=CREDENTIALS)

    if binding.is_soap:
        body = etree.fromstring(request.body).find(f"{{{asmx.ENVELOPE_NS[binding]}}}Body")
        assert body is not None
        (element,) = list(body)
        assert element.tag == "{http://api.giact.com/verificationservices/v5}GetMobileConsentText"
        assert len(element) == 0
        assert not element.text
    else:
        assert "?" not in request.path
        assert request.body == b""
    if binding is vc.Binding.HTTP_POST:
        # httpx would send no Content-Type for an empty form, and ASMX refuses that.
        assert request.header("Content-Type") == "application/x-www-form-urlencoded"


@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
def test_soapaction_is_quoted_on_soap11_and_absent_elsewhere(
    binding: vc.Binding, operation: vc.Operation
) -> None:
    request = vc.codec_for(binding).encode(
        operation, GOLDEN[operation.name].params, credentials=CREDENTIALS
    )

    action = request.header("SOAPAction")
    if binding is vc.Binding.SOAP11:
        assert action is not None
        assert action.startswith('"')
        assert action.endswith(f'/{operation.name}"')
    else:
        assert action is None


@pytest.mark.parametrize("binding", [vc.Binding.HTTP_GET, vc.Binding.HTTP_POST])
@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
def test_plain_http_requests_carry_no_credentials(
    binding: vc.Binding, operation: vc.Operation
) -> None:
    credentials = vc.Credentials("someone-unique", "secret-unique")

    request = vc.codec_for(binding).encode(
        operation, GOLDEN[operation.name].params, credentials=credentials
    )

    wire = request.path + repr(request.headers) + request.body.decode()
    assert "someone-unique" not in wire
    assert "secret-unique" not in wire


def test_soapaction_follows_a_configured_namespace_with_one_slash() -> None:
    for namespace in ("urn:test/v5", "urn:test/v5/"):
        codec = vc.codec_for(vc.Binding.SOAP11, namespace=namespace)

        request = codec.encode("GetMobileConsentText", credentials=CREDENTIALS)

        assert request.header("SOAPAction") == '"urn:test/v5/GetMobileConsentText"'
