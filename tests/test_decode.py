"""Decoding hand-made ASMX answers for every operation in every binding.

Each case is the inner XML of the result element (SOAP ``<Op>Result``, or the
bare root of HTTP GET/POST) and the typed value it must decode to. Results are
compared by ``repr`` so that NaN equals NaN and ``True`` differs from ``1``.
"""

from __future__ import annotations

from typing import NamedTuple

import asmx
import pytest

import verif_client as vc

SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
LOCATION = "SecureLink_MobileLocation_GetResult"
REJECT = "UpdatePrivateBadCheckRejectReason"
REVOKE = "RevokeMobileConsent"
CONSENT = "GetMobileConsentText"

NOT_AVAILABLE = "Location not available for this SecureLink RequestID"
SPECIALS_XML = "a &lt; b &amp;&amp; c &gt; d &quot;q&quot; &apos;s&apos; café 🎉 &#xD;"
SPECIALS = "a < b && c > d \"q\" 's' café 🎉 \r"


class Case(NamedTuple):
    operation: str
    id: str
    content: str
    expected: object


FULL_LOCATION = """
    <LocationResult>
      <Latitude>-97.123456789012337</Latitude>
      <Longitude>1E-05</Longitude>
      <AccuracyRadius>INF</AccuracyRadius>
      <Altitude>-INF</Altitude>
      <AltitudeAccuracy>NaN</AltitudeAccuracy>
      <Address>1 Rue de l'Église &amp; Fils</Address>
      <ZipPostalCode>75001</ZipPostalCode>
      <City>Paris</City>
      <StateRegion>Île-de-France</StateRegion>
      <CountyDistrict>1er 🎉</CountyDistrict>
      <Country>FR</Country>
      <Distance>2147483647</Distance>
    </LocationResult>"""

CASES = [
    Case(
        SEND,
        "id-2^63-1-error-absent",
        "<SecureLinkRequestId>9223372036854775807</SecureLinkRequestId>",
        vc.RequestResult(2**63 - 1, None),
    ),
    Case(
        SEND,
        "id-above-2^32-error-nil",
        '<SecureLinkRequestId>4294967297</SecureLinkRequestId><ErrorMessage xsi:nil="true" />',
        vc.RequestResult(2**32 + 1, None),
    ),
    Case(
        SEND,
        "id-above-2^31-error-empty",
        "<SecureLinkRequestId>2147483648</SecureLinkRequestId><ErrorMessage />",
        vc.RequestResult(2**31, ""),
    ),
    Case(
        SEND,
        "refused-with-specials-and-non-ascii",
        f"<SecureLinkRequestId>0</SecureLinkRequestId><ErrorMessage>{SPECIALS_XML}</ErrorMessage>",
        vc.RequestResult(0, SPECIALS),
    ),
    Case(
        SEND,
        "unknown-elements-ignored",
        "<Future>1</Future><SecureLinkRequestId>7</SecureLinkRequestId>"
        "<Nested><ErrorMessage>not mine</ErrorMessage></Nested>",
        vc.RequestResult(7, None),
    ),
    Case(VERIFIED, "true", "<Verified>true</Verified>", vc.VerificationResult(True, None)),
    Case(VERIFIED, "false", "<Verified>false</Verified>", vc.VerificationResult(False, None)),
    Case(VERIFIED, "one", "<Verified>1</Verified>", vc.VerificationResult(True, None)),
    Case(VERIFIED, "zero", "<Verified>0</Verified>", vc.VerificationResult(False, None)),
    Case(
        VERIFIED,
        "nil-is-pending-not-false",
        '<Verified xsi:nil="true" />',
        vc.VerificationResult(None, None),
    ),
    Case(VERIFIED, "absent-is-pending", "", vc.VerificationResult(None, None)),
    Case(VERIFIED, "empty-is-no-value", "<Verified />", vc.VerificationResult(None, None)),
    Case(
        VERIFIED,
        "error-message",
        '<Verified xsi:nil="true" /><ErrorMessage>Invalid RequestId: é</ErrorMessage>',
        vc.VerificationResult(None, "Invalid RequestId: é"),
    ),
    Case(
        VERIFIED,
        "unknown-elements-ignored",
        "<Extra><Verified>false</Verified></Extra><Verified>true</Verified><Zzz/>",
        vc.VerificationResult(True, None),
    ),
    Case(
        LOCATION,
        "full-with-double-forms",
        FULL_LOCATION,
        vc.LocationResult(
            vc.Location(
                latitude=-97.123456789012337,
                longitude=0.00001,
                accuracy_radius=float("inf"),
                altitude=float("-inf"),
                altitude_accuracy=float("nan"),
                address="1 Rue de l'Église & Fils",
                zip_postal_code="75001",
                city="Paris",
                state_region="Île-de-France",
                county_district="1er 🎉",
                country="FR",
                distance=2147483647,
            ),
            None,
        ),
    ),
    Case(
        LOCATION,
        "absent-with-not-available-message",
        f"<ErrorMessage>{NOT_AVAILABLE}</ErrorMessage>",
        vc.LocationResult(None, NOT_AVAILABLE),
    ),
    Case(
        LOCATION,
        "nil",
        '<LocationResult xsi:nil="true" />',
        vc.LocationResult(None, None),
    ),
    Case(
        LOCATION,
        "nil-absent-and-empty-fields",
        '<LocationResult><Latitude xsi:nil="true" /><Longitude>1E+15</Longitude>'
        "<City /><Country>US</Country><Future>x</Future></LocationResult>",
        vc.LocationResult(vc.Location(longitude=1e15, city="", country="US"), None),
    ),
    Case(REJECT, "true", "true", True),
    Case(REJECT, "zero", "0", False),
    Case(REVOKE, "false", "false", False),
    Case(REVOKE, "one", "1", True),
    Case(CONSENT, "specials-and-non-ascii", SPECIALS_XML, SPECIALS),
    Case(CONSENT, "multi-line", "Line 1\nLine 2\tTabbed", "Line 1\nLine 2\tTabbed"),
    Case(CONSENT, "empty", "", ""),
]


def test_every_operation_has_decode_cases() -> None:
    assert {case.operation for case in CASES} == {op.name for op in vc.OPERATIONS}


@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.operation}-{case.id}")
def test_decodes_the_asmx_answer(binding: vc.Binding, case: Case) -> None:
    op = vc.get_operation(case.operation)

    result = asmx.decode(binding, op, asmx.response(binding, op, case.content))

    assert type(result) is type(case.expected)
    assert repr(result) == repr(case.expected)


# One ordinary answer per operation, to be re-dressed in the ways a server may write it.
def _case(operation: str, case_id: str) -> Case:
    (found,) = [case for case in CASES if (case.operation, case.id) == (operation, case_id)]
    return found


TYPICAL = {
    SEND: _case(SEND, "id-above-2^32-error-nil"),
    VERIFIED: _case(VERIFIED, "error-message"),
    LOCATION: _case(LOCATION, "full-with-double-forms"),
    REJECT: _case(REJECT, "true"),
    REVOKE: _case(REVOKE, "false"),
    CONSENT: _case(CONSENT, "specials-and-non-ascii"),
}


def _compact(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.response(binding, op, content)


def _pretty(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.pretty(asmx.response(binding, op, content))


def _pretty_crlf(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.pretty(asmx.response(binding, op, content), newline=b"\r\n")


def _bom(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.BOM + asmx.response(binding, op, content)


def _no_declaration(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.response(binding, op, content).removeprefix(asmx.DECLARATION.encode())


def _prefix_s(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.response(binding, op, content, prefix="s")


def _prefix_env(binding: vc.Binding, op: vc.Operation, content: str) -> bytes:
    return asmx.pretty(asmx.response(binding, op, content, prefix="env"))


VARIANTS = {
    "compact": _compact,
    "pretty": _pretty,
    "pretty-crlf": _pretty_crlf,
    "bom": _bom,
    "no-declaration": _no_declaration,
    "prefix-s": _prefix_s,
    "prefix-env-pretty": _prefix_env,
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
def test_layout_prefixes_and_bom_do_not_change_the_result(
    operation: vc.Operation, binding: vc.Binding, variant: str
) -> None:
    case = TYPICAL[operation.name]
    body = VARIANTS[variant](binding, operation, case.content)

    result = asmx.decode(binding, operation, body)

    assert repr(result) == repr(case.expected)


@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
def test_prefixed_service_namespace_and_attribute_order_are_irrelevant(
    binding: vc.Binding,
) -> None:
    body = f"""<?xml version="1.0" encoding="utf-8"?>\r
<env:Envelope xmlns:xsd="{asmx.XSD}" xmlns:env="{asmx.ENVELOPE_NS[binding]}"\r
              xmlns:i="{asmx.XSI}">\r
  <env:Header/>\r
  <env:Body>\r
    <m:SecureLink_SecurityCode_HasBeenVerifiedResponse xmlns:m="{asmx.NS}">\r
      <m:SecureLink_SecurityCode_HasBeenVerifiedResult>\r
        <m:Verified i:nil="true"/>\r
        <m:ErrorMessage>Pending: the owner has not answered</m:ErrorMessage>\r
      </m:SecureLink_SecurityCode_HasBeenVerifiedResult>\r
    </m:SecureLink_SecurityCode_HasBeenVerifiedResponse>\r
  </env:Body>\r
</env:Envelope>\r
""".encode()

    result = asmx.decode(binding, vc.get_operation(VERIFIED), body)

    assert result == vc.VerificationResult(None, "Pending: the owner has not answered")


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_verified_nil_is_pending_and_never_false(binding: vc.Binding) -> None:
    op = vc.get_operation(VERIFIED)

    result = asmx.decode(binding, op, asmx.response(binding, op, '<Verified xsi:nil="true" />'))

    assert isinstance(result, vc.VerificationResult)
    assert result.verified is None
    assert result.pending


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_location_not_available_reads_as_pending(binding: vc.Binding) -> None:
    op = vc.get_operation(LOCATION)
    content = f"<ErrorMessage>{NOT_AVAILABLE}</ErrorMessage>"

    result = asmx.decode(binding, op, asmx.response(binding, op, content))

    assert isinstance(result, vc.LocationResult)
    assert result.location is None
    assert result.pending


class Number(NamedTuple):
    text: str
    value: float


@pytest.mark.parametrize(
    "number",
    [
        Number("1.5", 1.5),
        Number("-97.123456789012337", -97.123456789012337),
        Number("3.9999999999999996", 3.9999999999999996),
        Number("1E-05", 1e-05),
        Number("1E+15", 1e15),
        Number(" 42 ", 42.0),
        Number("-0", -0.0),
        Number("INF", float("inf")),
        Number("-INF", float("-inf")),
    ],
    ids=lambda number: number.text,
)
def test_doubles_decode_exactly(number: Number) -> None:
    op = vc.get_operation(LOCATION)
    content = f"<LocationResult><Latitude>{number.text}</Latitude></LocationResult>"

    result = asmx.decode(vc.Binding.HTTP_GET, op, asmx.response(vc.Binding.HTTP_GET, op, content))

    assert isinstance(result, vc.LocationResult)
    assert result.location is not None
    assert repr(result.location.latitude) == repr(number.value)


NS = "http://api.giact.com/verificationservices/v5"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
NULL_CONSENT_TEXT = {
    # ASMX leaves a null string result out of the SOAP response element...
    vc.Binding.SOAP11: (
        f'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap='
        f'"http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="{XSI}"><soap:Body>'
        f'<GetMobileConsentTextResponse xmlns="{NS}" /></soap:Body></soap:Envelope>'
    ),
    # ...and writes it nil as the bare GET/POST document.
    vc.Binding.HTTP_GET: (
        f'<?xml version="1.0" encoding="utf-8"?>\r\n<string xmlns:xsi="{XSI}" '
        f'xsi:nil="true" xmlns="{NS}" />'
    ),
}


@pytest.mark.parametrize("binding", list(NULL_CONSENT_TEXT))
def test_a_null_consent_text_reads_as_empty(binding: vc.Binding) -> None:
    headers = {"Content-Type": "text/xml; charset=utf-8"}
    body = NULL_CONSENT_TEXT[binding].encode()
    assert vc.codec_for(binding).decode(vc.GET_MOBILE_CONSENT_TEXT, 200, headers, body) == ""
