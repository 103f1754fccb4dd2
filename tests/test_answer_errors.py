"""What a user reads when an answer is not a result: the error's type, its whole
message (naming the operation, the element and the problem), its status code.
Each row is bytes a peer could send; nothing here pins a private attribute."""

from __future__ import annotations

from typing import NamedTuple

import asmx
import pytest

import verif_client as vc

CONSENT = vc.get_operation("GetMobileConsentText")
VERIFIED = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
REVOKE = vc.get_operation("RevokeMobileConsent")
SEND = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
SOAP, GET = vc.Binding.SOAP11, vc.Binding.HTTP_GET
SOAP_NS = "http://schemas.xmlsoap.org/soap/envelope/"


class Case(NamedTuple):
    binding: vc.Binding
    op: vc.Operation
    status: int
    body: bytes
    error: type[vc.ResponseError]
    message: str
    # Set for what is refused before reading (the HTTP status); None for a result unread.
    status_code: int | None


def nil_result(op: vc.Operation) -> bytes:
    result = f"<{op.name}Result>"
    return asmx.response(SOAP, op, "").replace(
        result.encode(), result[:-1].encode() + b' xsi:nil="true">'
    )


CASES = {
    "401-empty": Case(SOAP, CONSENT, 401, b"", vc.AuthenticationError, "HTTP 401", 401),
    "html-page": Case(
        SOAP,
        CONSENT,
        200,
        b"<!DOCTYPE html><html><head><title> Oops \xe9 </title></head></html>",
        vc.DecodeError,
        "expected an XML answer, got 'Oops \ufffd'",
        200,
    ),
    "html-upper-case": Case(
        SOAP,
        CONSENT,
        200,
        b"<HTML><title>Up</title></HTML>",
        vc.DecodeError,
        "expected an XML answer, got 'Up'",
        200,
    ),
    "text-first-line": Case(
        SOAP,
        CONSENT,
        200,
        b"plain text first\nsecond line",
        vc.DecodeError,
        "expected an XML answer, got 'plain text first'",
        200,
    ),
    "500-long-line": Case(
        SOAP, CONSENT, 500, b"x" * 600, vc.HTTPStatusError, "HTTP 500: " + "x" * 500, 500
    ),
    "long-title": Case(
        SOAP,
        CONSENT,
        503,
        b"<html><title>" + b"t" * 600 + b"</title></html>",
        vc.HTTPStatusError,
        "HTTP 503: " + "t" * 500,
        503,
    ),
    "500-refused-xml": Case(
        SOAP,
        CONSENT,
        500,
        b"<!DOCTYPE a><a/>",
        vc.HTTPStatusError,
        "HTTP 500: <!DOCTYPE a><a/>",
        500,
    ),
    "200-refused-xml": Case(
        SOAP,
        CONSENT,
        200,
        b"<!DOCTYPE a><a/>",
        vc.DecodeError,
        "a DOCTYPE or entity declaration is not allowed",
        200,
    ),
    "nil-record": Case(
        SOAP,
        VERIFIED,
        200,
        nil_result(VERIFIED),
        vc.DecodeError,
        "SecureLink_SecurityCode_HasBeenVerifiedResult: the service returned no result",
        None,
    ),
    "bad-boolean": Case(
        GET,
        REVOKE,
        200,
        asmx.response(GET, REVOKE, "maybe"),
        vc.DecodeError,
        "RevokeMobileConsentResult: 'maybe' is not an xsd:boolean",
        None,
    ),
    "no-boolean": Case(
        GET,
        REVOKE,
        200,
        asmx.response(GET, REVOKE, ""),
        vc.DecodeError,
        "RevokeMobileConsentResult: no xsd:boolean value",
        None,
    ),
    "bad-field": Case(
        GET,
        VERIFIED,
        200,
        asmx.response(GET, VERIFIED, "<Verified>maybe</Verified>"),
        vc.DecodeError,
        "SecureLink_SecurityCode_HasBeenVerifiedResult/Verified: 'maybe' is not an xsd:boolean",
        None,
    ),
    "missing-required": Case(
        GET,
        SEND,
        200,
        asmx.response(GET, SEND, "<ErrorMessage>x</ErrorMessage>"),
        vc.DecodeError,
        "SecureLink_Confirmation_SendRequestViaSmsResult/SecureLinkRequestId: "
        "required value is missing or nil",
        None,
    ),
    "not-an-envelope": Case(
        SOAP,
        CONSENT,
        200,
        b"<other/>",
        vc.DecodeError,
        "expected a SOAP Envelope, got <other>",
        200,
    ),
    "500-not-an-envelope": Case(
        SOAP, CONSENT, 500, b"<other/>", vc.HTTPStatusError, "HTTP 500: <other> document", 500
    ),
    "500-no-fault": Case(
        SOAP,
        CONSENT,
        500,
        asmx.envelope(SOAP, "<x/>"),
        vc.HTTPStatusError,
        "HTTP 500: SOAP envelope without a fault",
        500,
    ),
    "empty-body": Case(
        SOAP,
        CONSENT,
        200,
        asmx.envelope(SOAP, ""),
        vc.DecodeError,
        "Body: the SOAP Body is missing or empty",
        None,
    ),
    "no-body": Case(
        SOAP,
        CONSENT,
        200,
        f'<soap:Envelope xmlns:soap="{SOAP_NS}"/>'.encode(),
        vc.DecodeError,
        "Body: the SOAP Body is missing or empty",
        None,
    ),
    "other-response": Case(
        SOAP,
        CONSENT,
        200,
        asmx.envelope(SOAP, '<Other xmlns="urn:x"/>'),
        vc.DecodeError,
        "Body: expected <GetMobileConsentTextResponse>, got <Other>",
        200,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_an_answer_that_is_not_a_result_says_what_it_is(case: Case) -> None:
    with pytest.raises(case.error) as caught:
        vc.codec_for(case.binding).decode(case.op, case.status, [], case.body)

    assert type(caught.value) is case.error
    assert str(caught.value) == f"{case.op.name}: {case.message}"
    assert caught.value.status_code == case.status_code
    if case.message.startswith("Body: "):
        assert isinstance(caught.value, vc.DecodeError)
        assert caught.value.element == "Body"


def test_whitespace_before_the_document_and_a_soap_header_are_read_past() -> None:
    bare = asmx.response(GET, CONSENT, "hi").split(b"?>", 1)[1]
    assert vc.codec_for(GET).decode(CONSENT, 200, [], b"\n  " + bare) == "hi"
    with_header = asmx.response(SOAP, VERIFIED, "<Verified>true</Verified>").replace(
        b"<soap:Body>", b"<soap:Header><Other>1</Other></soap:Header><soap:Body>"
    )
    assert vc.codec_for(SOAP).decode(VERIFIED, 200, [], with_header) == vc.VerificationResult(
        verified=True
    )
    # A header nested as deep as the result must not be read for it.
    traced = asmx.response(SOAP, CONSENT, "the consent text").replace(
        b"<soap:Body>",
        b"<soap:Header><Trace><Hop>not the text</Hop></Trace></soap:Header><soap:Body>",
    )
    assert vc.codec_for(SOAP).decode(CONSENT, 200, [], traced) == "the consent text"


def test_an_answer_in_another_namespace_is_still_read() -> None:
    # Not the namespace the codec was made for: read by the tolerant walk.
    for binding in (SOAP, vc.Binding.SOAP12):
        body = asmx.response(binding, VERIFIED, "<Verified>false</Verified>")
        body = body.replace(asmx.NS.encode(), b"urn:another-namespace")
        result = vc.codec_for(binding).decode(VERIFIED, 200, [], body)
        assert result == vc.VerificationResult(verified=False)
        unreadable = body.replace(b">false<", b">maybe<")
        with pytest.raises(vc.DecodeError) as caught:
            vc.codec_for(binding).decode(VERIFIED, 200, [], unreadable)
        assert caught.value.element == "SecureLink_SecurityCode_HasBeenVerifiedResult/Verified"


@pytest.mark.parametrize(
    ("username", "password", "message", "value"),
    [
        (5, "p", "ApiUsername: must be a str (got 5)", 5),
        (
            "u\x00",
            "p",
            "ApiUsername: contains a character XML cannot carry (got 'u\\x00')",
            "u\x00",
        ),
        ("u", 5, "ApiPassword: must be a str", None),
        ("u", "p\x00", "ApiPassword: contains a character XML cannot carry", None),
    ],
)
def test_bad_credentials_are_refused_showing_the_username_never_the_password(
    username: object, password: object, message: str, value: object
) -> None:
    with pytest.raises(vc.RequestValidationError) as caught:
        vc.Credentials(username, password)  # type: ignore[arg-type]

    assert str(caught.value) == message
    assert caught.value.value == value


def test_a_codec_says_which_binding_and_namespace_it_speaks() -> None:
    assert repr(vc.codec_for(SOAP)) == f"<Soap11Codec soap11 namespace='{asmx.NS}'>"
    assert repr(vc.codec_for(GET, namespace="urn:x")) == "<HttpGetCodec http-get namespace='urn:x'>"
