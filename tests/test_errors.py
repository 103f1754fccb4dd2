"""Answers that are not results: faults, HTTP errors, credential refusals, bad values."""

from __future__ import annotations

from typing import NamedTuple

import asmx
import pytest

import verif_client as vc

ALL_BINDINGS = list(vc.Binding)
SOAP_BINDINGS = [vc.Binding.SOAP11, vc.Binding.SOAP12]
by_operation = pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)

SOAP11_FAULT = """
    <soap:Fault>
      <faultcode>soap:Client</faultcode>
      <faultstring>System.Web.Services.Protocols.SoapException: Server was unable to read
 request. ---&gt; RequestId &lt; 0</faultstring>
      <detail><message>RequestId must be positive</message></detail>
    </soap:Fault>"""

SOAP12_FAULT = """
    <soap:Fault>
      <soap:Code>
        <soap:Value>soap:Sender</soap:Value>
        <soap:Subcode><soap:Value xmlns:app="urn:app">app:InvalidRequest</soap:Value></soap:Subcode>
      </soap:Code>
      <soap:Reason>
        <soap:Text xml:lang="de">Ungültige Anfrage</soap:Text>
        <soap:Text xml:lang="en">Server was unable to process request.</soap:Text>
      </soap:Reason>
      <soap:Detail><message>RequestId must be positive</message></soap:Detail>
    </soap:Fault>"""

MISSING_PARAMETER = (
    b"System.InvalidOperationException: Missing parameter: RequestId.\r\n"
    b"   at System.Web.Services.Protocols.ValueCollectionParameterReader.Read("
    b"NameValueCollection collection)\r\n"
    b"   at System.Web.Services.Protocols.UrlParameterReader.Read(HttpRequest request)\r\n"
    b"   at System.Web.Services.Protocols.HttpServerProtocol.ReadParameters()\r\n"
    b"   at System.Web.Services.Protocols.WebServiceHandler.CoreProcessRequest()\r\n"
)

IIS_401 = b"""<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
<head>
<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"/>
<title>401 - Unauthorized: Access is denied due to invalid credentials.</title>
</head>
<body><div id="header"><h1>Server Error</h1></div>
<h2>401 - Unauthorized: Access is denied due to invalid credentials.</h2>
</body>
</html>
"""


def decode_result(
    binding: vc.Binding, op: vc.Operation, body: bytes, status: int = 200, **options: int
) -> object:
    codec = vc.codec_for(binding, **options)  # type: ignore[arg-type]
    return codec.decode(op, status, asmx.headers(binding), body)


def decode(binding: vc.Binding, op: vc.Operation, status: int, body: bytes, **options: int) -> None:
    decode_result(binding, op, body, status, **options)


@by_operation
def test_soap11_fault_carries_code_reason_and_detail(operation: vc.Operation) -> None:
    body = asmx.envelope(vc.Binding.SOAP11, SOAP11_FAULT)

    with pytest.raises(vc.SoapFault) as caught:
        decode(vc.Binding.SOAP11, operation, 500, body)

    fault = caught.value
    assert fault.code == "Client"
    assert fault.subcode is None
    assert fault.reason.startswith("System.Web.Services.Protocols.SoapException")
    assert fault.reason.endswith("---> RequestId < 0")
    assert fault.detail == "RequestId must be positive"
    assert fault.status_code == 500
    assert fault.soap_version == "1.1"
    assert fault.is_client_fault
    assert fault.operation == operation.name


@by_operation
def test_soap12_fault_carries_code_subcode_english_reason_and_detail(
    operation: vc.Operation,
) -> None:
    body = asmx.envelope(vc.Binding.SOAP12, SOAP12_FAULT)

    with pytest.raises(vc.SoapFault) as caught:
        decode(vc.Binding.SOAP12, operation, 500, body)

    fault = caught.value
    assert fault.code == "Sender"
    assert fault.subcode == "InvalidRequest"
    assert fault.reason == "Server was unable to process request."
    assert fault.detail == "RequestId must be positive"
    assert fault.soap_version == "1.2"
    assert fault.is_client_fault
    assert "Server was unable to process request." in str(fault)


@pytest.mark.parametrize("binding", SOAP_BINDINGS)
def test_server_fault_is_not_a_client_fault(binding: vc.Binding) -> None:
    fault_xml = (
        "<s:Fault><faultcode>s:Server</faultcode><faultstring>boom</faultstring></s:Fault>"
        if binding is vc.Binding.SOAP11
        else "<s:Fault><s:Code><s:Value>s:Receiver</s:Value></s:Code>"
        '<s:Reason><s:Text xml:lang="en">boom</s:Text></s:Reason></s:Fault>'
    )

    with pytest.raises(vc.SoapFault) as caught:
        decode(binding, vc.OPERATIONS[0], 500, asmx.envelope(binding, fault_xml, prefix="s"))

    assert caught.value.code in ("Server", "Receiver")
    assert not caught.value.is_client_fault
    assert caught.value.reason == "boom"
    assert caught.value.detail is None


class Refusal(NamedTuple):
    status: int
    body: bytes
    error: type[vc.ResponseError]
    shown: str


REFUSALS = {
    "asmx-text-500": Refusal(
        500,
        MISSING_PARAMETER,
        vc.HTTPStatusError,
        "System.InvalidOperationException: Missing parameter: RequestId.",
    ),
    # Served as text/xml, so the Content-Type must not be trusted.
    "credentials-200": Refusal(
        200, b"Error Message: Invalid API Credentials", vc.AuthenticationError, "Invalid API"
    ),
    "iis-401": Refusal(401, IIS_401, vc.AuthenticationError, "401 - Unauthorized: Access is"),
    "empty-400": Refusal(400, b"", vc.HTTPStatusError, "HTTP 400"),
}


@pytest.mark.parametrize("refusal", list(REFUSALS))
@pytest.mark.parametrize("binding", ALL_BINDINGS)
@by_operation
def test_non_xml_refusals_become_the_matching_error(
    binding: vc.Binding, operation: vc.Operation, refusal: str
) -> None:
    expected = REFUSALS[refusal]

    with pytest.raises(expected.error) as caught:
        decode(binding, operation, expected.status, expected.body)

    assert type(caught.value) is expected.error
    assert caught.value.status_code == expected.status
    assert expected.shown in str(caught.value)
    assert "CoreProcessRequest" not in str(caught.value), "only the first line is carried"


def test_http_status_error_carries_the_servers_first_line_as_sent() -> None:
    with pytest.raises(vc.HTTPStatusError) as caught:
        decode(vc.Binding.HTTP_GET, vc.OPERATIONS[1], 500, asmx.BOM + MISSING_PARAMETER)

    assert (
        caught.value.server_message
        == "System.InvalidOperationException: Missing parameter: RequestId."
    )


@pytest.mark.parametrize("binding", ALL_BINDINGS)
@pytest.mark.parametrize(
    "body",
    [b"", b"OK", b"\xff\xfe\x00garbage", b"<unclosed", b'{"json": true}', b"<html><p>hi</p>"],
    ids=["empty", "text", "binary", "unclosed", "json", "html"],
)
def test_non_xml_200_is_a_decode_error(binding: vc.Binding, body: bytes) -> None:
    with pytest.raises(vc.DecodeError) as caught:
        decode(binding, vc.OPERATIONS[0], 200, body)

    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ or caught.value.__context__ is None


@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_bad_value_is_a_decode_error_naming_element_and_value(binding: vc.Binding) -> None:
    op = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
    body = asmx.response(binding, op, "<Verified>maybe</Verified>")

    with pytest.raises(vc.DecodeError) as caught:
        decode(binding, op, 200, body)

    assert caught.value.element is not None
    assert caught.value.element.endswith("/Verified")
    assert "maybe" in str(caught.value)
    assert caught.value.operation == op.name


@pytest.mark.parametrize("binding", ALL_BINDINGS)
@pytest.mark.parametrize(
    ("operation", "content", "element"),
    [
        ("SecureLink_Confirmation_SendRequestViaSms", "<ErrorMessage>x</ErrorMessage>", "Id"),
        (
            "SecureLink_Confirmation_SendRequestViaSms",
            "<SecureLinkRequestId>9223372036854775808</SecureLinkRequestId>",
            "SecureLinkRequestId",
        ),
        (
            "SecureLink_MobileLocation_GetResult",
            "<LocationResult><Distance>2147483648</Distance></LocationResult>",
            "LocationResult/Distance",
        ),
        (
            "SecureLink_MobileLocation_GetResult",
            "<LocationResult><Latitude>inf</Latitude></LocationResult>",
            "LocationResult/Latitude",
        ),
        ("RevokeMobileConsent", "yes", ""),
        ("UpdatePrivateBadCheckRejectReason", "", ""),
    ],
    ids=["id-missing", "id-overflow", "int-overflow", "python-inf", "bool", "bool-empty"],
)
def test_values_outside_the_xsd_types_are_decode_errors(
    binding: vc.Binding, operation: str, content: str, element: str
) -> None:
    op = vc.get_operation(operation)

    with pytest.raises(vc.DecodeError) as caught:
        decode(binding, op, 200, asmx.response(binding, op, content))

    assert caught.value.element is not None
    assert caught.value.element.endswith(element)


@pytest.mark.parametrize("digits", [4301, 20_000])
@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_absurdly_long_numbers_are_decode_errors(binding: vc.Binding, digits: int) -> None:
    op = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
    content = f"<SecureLinkRequestId>{'1' * digits}</SecureLinkRequestId>"

    with pytest.raises(vc.DecodeError):
        decode(binding, op, 200, asmx.response(binding, op, content))


@pytest.mark.parametrize("digits", ["١٢٣", "\uff11\uff12\uff13", "१२३"])
@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_only_ascii_digits_are_xsd_numbers(binding: vc.Binding, digits: str) -> None:
    op = vc.get_operation("SecureLink_MobileLocation_GetResult")

    for field in ("Latitude", "Distance"):
        content = f"<LocationResult><{field}>{digits}</{field}></LocationResult>"
        with pytest.raises(vc.DecodeError):
            decode(binding, op, 200, asmx.response(binding, op, content))


@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_leading_zeros_do_not_count_against_the_long_range(binding: vc.Binding) -> None:
    op = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
    content = f"<SecureLinkRequestId>{'0' * 5000}42</SecureLinkRequestId>"

    result = decode_result(binding, op, asmx.response(binding, op, content))

    assert result == vc.RequestResult(42, None)


@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_decode_error_shows_a_bounded_excerpt_of_a_huge_value(binding: vc.Binding) -> None:
    op = vc.get_operation("RevokeMobileConsent")

    with pytest.raises(vc.DecodeError) as caught:
        decode(binding, op, 200, asmx.response(binding, op, "maybe" * 100_000))

    assert "maybe" in str(caught.value)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_answer_for_another_operation_is_a_decode_error(binding: vc.Binding) -> None:
    other = vc.get_operation("GetMobileConsentText")
    body = asmx.response(binding, other, "text")

    with pytest.raises(vc.DecodeError):
        decode(binding, vc.get_operation("RevokeMobileConsent"), 200, body)


@pytest.mark.parametrize("binding", ALL_BINDINGS)
def test_body_over_the_cap_is_refused_before_parsing(binding: vc.Binding) -> None:
    op = vc.get_operation("GetMobileConsentText")
    body = asmx.response(binding, op, "x" * 2000)

    with pytest.raises(vc.ResponseTooLargeError) as caught:
        decode(binding, op, 200, body, max_response_bytes=1000)

    assert caught.value.limit == 1000
    assert "1000" in str(caught.value)
    # Exactly at the cap is still read.
    decode(binding, op, 200, body, max_response_bytes=len(body))


def test_error_hierarchy_separates_our_mistakes_from_the_services() -> None:
    assert issubclass(vc.RequestValidationError, ValueError)
    for answer_error in (
        vc.AuthenticationError,
        vc.SoapFault,
        vc.HTTPStatusError,
        vc.DecodeError,
        vc.ResponseTooLargeError,
    ):
        assert issubclass(answer_error, vc.ResponseError)
        assert not issubclass(answer_error, vc.RequestValidationError)
    for error in (vc.ResponseError, vc.TransportError, vc.RequestValidationError):
        assert issubclass(error, vc.VerifClientError)
    assert not issubclass(vc.TransportError, vc.ResponseError)
