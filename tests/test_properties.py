"""Properties over arbitrary values: the wire carries them intact, and no input
makes a decoder raise anything but the library's own errors.

What ``encode`` wrote is read back by independent readers (lxml for SOAP,
``urllib.parse`` for GET/POST), never by the library itself.
"""

from __future__ import annotations

import contextlib
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import asmx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

import verif_client as vc

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# Moderate counts: the grid of 24 operation x binding cases multiplies them.
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOME = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

by_binding = pytest.mark.parametrize("binding", list(vc.Binding))
by_operation = pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)


def _is_xml_char(char: str) -> bool:
    code = ord(char)
    return (
        char in "\t\n\r"
        or 0x20 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


xml_chars = st.characters(codec="utf-8").filter(_is_xml_char)
specials = st.sampled_from(["<", ">", "&", "'", '"', "\r", "\n", "\r\n", "\t", "]]>", "&#", "<a"])
specials |= st.sampled_from(["%", "+", "=", "?", "#", ";", " ", "%20", "é", "🎉", "\u2028"])
xml_texts = st.lists(specials | xml_chars, max_size=40).map("".join)
longs = st.integers(LONG_MIN, LONG_MAX)


def values_for(op: vc.Operation) -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries(
        {param.name: longs if param.type.name == "long" else xml_texts for param in op.params}
    )


def as_text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def read_soap(body: bytes) -> tuple[list[tuple[str, str]], tuple[str, str]]:
    """Parameters and credentials as a plain lxml reading sees them."""
    root = etree.fromstring(body)
    ns = {"v5": asmx.NS}
    body = root.find(f"{{{root.nsmap['soap']}}}Body")
    assert body is not None
    (operation,) = body
    params = [(etree.QName(child).localname, child.text or "") for child in operation]
    username = root.findtext(".//v5:AuthenticationHeader/v5:ApiUsername", namespaces=ns)
    password = root.findtext(".//v5:AuthenticationHeader/v5:ApiPassword", namespaces=ns)
    return params, (username or "", password or "")


def read_plain(binding: vc.Binding, request: vc.HTTPRequest) -> list[tuple[str, str]]:
    if binding is vc.Binding.HTTP_GET:
        wire = urlsplit(request.path).query
    else:
        wire = request.body.decode("ascii")
    return parse_qsl(wire, keep_blank_values=True, strict_parsing=bool(wire), errors="strict")


@SOME
@given(data=st.data())
@by_binding
@by_operation
def test_encoded_values_read_back_identically(
    operation: vc.Operation, binding: vc.Binding, data: st.DataObject
) -> None:
    params = data.draw(values_for(operation), label="params")
    credentials = vc.Credentials(data.draw(xml_texts), data.draw(xml_texts))
    # The service rules (phone regex, question length, ASP.NET values) are not the point here.
    codec = vc.codec_for(binding, validate=False)

    request = codec.encode(operation, params, credentials=credentials)

    expected = [(name, as_text(params[name])) for name in operation.param_names]
    if binding.is_soap:
        read, creds = read_soap(request.body)
        assert creds == (credentials.username, credentials.password)
    else:
        read = read_plain(binding, request)
        assert request.path.split("?")[0].endswith("/" + operation.name)
    assert read == expected


@FEW
@given(
    phone=st.from_regex(r"[0-9]{7,15}", fullmatch=True),
    question=xml_texts.filter(lambda text: 0 < len(text.encode("utf-16-le")) // 2 <= 200),
)
@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
def test_values_within_the_service_rules_pass_validation_on_soap(
    binding: vc.Binding, phone: str, question: str
) -> None:
    params = {"PhoneNumber": phone, "ConfirmationQuestion": question}

    request = vc.codec_for(binding).encode("SecureLink_Confirmation_SendRequestViaSms", params)

    assert read_soap(request.body)[0] == list(params.items())


def xml_escape(text: str) -> str:
    return escape(text).replace("\r", "&#xD;")


@SOME
@given(text=xml_texts)
@by_binding
def test_any_string_the_service_sends_is_decoded_identically(
    binding: vc.Binding, text: str
) -> None:
    op = vc.get_operation("GetMobileConsentText")

    assert asmx.decode(binding, op, asmx.response(binding, op, xml_escape(text))) == text


@SOME
@given(request_id=st.integers(0, LONG_MAX), message=xml_texts)
@by_binding
def test_any_request_id_and_message_are_decoded_identically(
    binding: vc.Binding, request_id: int, message: str
) -> None:
    op = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
    content = (
        f"<SecureLinkRequestId>{request_id}</SecureLinkRequestId>"
        f"<ErrorMessage>{xml_escape(message)}</ErrorMessage>"
    )

    result = asmx.decode(binding, op, asmx.response(binding, op, content))

    assert result == vc.RequestResult(request_id, message)


@SOME
@given(number=st.floats(allow_nan=False, allow_infinity=False))
@by_binding
def test_any_finite_double_is_decoded_exactly(binding: vc.Binding, number: float) -> None:
    op = vc.get_operation("SecureLink_MobileLocation_GetResult")
    content = f"<LocationResult><Altitude>{number!r}</Altitude></LocationResult>"

    result = asmx.decode(binding, op, asmx.response(binding, op, content))

    assert isinstance(result, vc.LocationResult)
    assert result.location is not None
    assert repr(result.location.altitude) == repr(number)


# -- robustness: only VerifClientError, whatever arrives ----------------------

SAMPLE_CONTENT = {
    "SecureLink_Confirmation_SendRequestViaSms": (
        "<SecureLinkRequestId>4294967297</SecureLinkRequestId><ErrorMessage>é &amp;</ErrorMessage>"
    ),
    "SecureLink_SecurityCode_HasBeenVerified": '<Verified xsi:nil="true" />',
    "SecureLink_MobileLocation_GetResult": (
        "<LocationResult><Latitude>1E-05</Latitude><City>Zoé</City>"
        "<Distance>12</Distance></LocationResult>"
    ),
    "UpdatePrivateBadCheckRejectReason": "true",
    "RevokeMobileConsent": "0",
    "GetMobileConsentText": "I agree &lt;🎉&gt;",
}


def sample(binding: vc.Binding, op: vc.Operation) -> bytes:
    return asmx.pretty(asmx.BOM + asmx.response(binding, op, SAMPLE_CONTENT[op.name]))


@st.composite
def mutated(draw: st.DrawFn, original: bytes) -> bytes:
    body = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(body)))
        how = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        if how == "flip" and where < len(body):
            body[where] ^= draw(st.integers(1, 255))
        elif how == "truncate":
            del body[where:]
        elif how == "insert":
            insertion = draw(
                st.binary(max_size=8)
                | st.sampled_from([b"<", b">", b"&", b"&#0;", b"<!DOCTYPE x>", b"\xff", b"9" * 30])
            )
            body[where:where] = insertion
        else:
            del body[where : where + draw(st.integers(1, 16))]
    return bytes(body)


def decode_or_library_error(
    binding: vc.Binding, op: vc.Operation, status: int, body: bytes
) -> None:
    with contextlib.suppress(vc.VerifClientError):
        asmx.decode(binding, op, body, status=status)


statuses = st.sampled_from([200, 200, 200, 400, 401, 404, 500])


@SOME
@given(data=st.data(), status=statuses)
@by_binding
@by_operation
def test_mutated_answers_raise_only_library_errors(
    operation: vc.Operation, binding: vc.Binding, status: int, data: st.DataObject
) -> None:
    body = data.draw(mutated(sample(binding, operation)), label="body")

    decode_or_library_error(binding, operation, status, body)


@SOME
@given(
    body=st.binary(max_size=200) | st.binary(max_size=200).map(b'<?xml version="1.0"?><'.__add__),
    status=statuses,
)
@by_binding
@by_operation
def test_random_bytes_raise_only_library_errors(
    operation: vc.Operation, binding: vc.Binding, status: int, body: bytes
) -> None:
    decode_or_library_error(binding, operation, status, body)
