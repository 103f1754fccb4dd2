"""Checks on what we are asked to send: nothing invalid leaves the library."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

import pytest
from lxml import etree

import verif_client as vc

SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
PASSWORD = "hunter2-Pa55word"
CREDENTIALS = vc.Credentials("api-user", PASSWORD)

ALL_BINDINGS = list(vc.Binding)
PLAIN_HTTP = [vc.Binding.HTTP_GET, vc.Binding.HTTP_POST]
by_binding = pytest.mark.parametrize("binding", ALL_BINDINGS)
by_validate = pytest.mark.parametrize("validate", [True, False])


def good_params(op: vc.Operation) -> dict[str, object]:
    values = {
        "PhoneNumber": "5551234567",
        "ConfirmationQuestion": "Did you ask to pay?",
        "RequestId": 42,
        "BadCheckId": 42,
        "CheckRejectReason": "NSF",
        "MobileNumber": "5551234567",
    }
    return {name: values[name] for name in op.param_names}


def encode(
    binding: vc.Binding, operation: str | vc.Operation, params: dict[str, object], **options: bool
) -> vc.HTTPRequest:
    codec = vc.codec_for(binding, **options)
    return codec.encode(operation, params, credentials=CREDENTIALS)


def refused(
    binding: vc.Binding, operation: str | vc.Operation, params: dict[str, object], **options: bool
) -> vc.RequestValidationError:
    with pytest.raises(vc.RequestValidationError) as caught:
        encode(binding, operation, params, **options)
    error = caught.value
    assert isinstance(error, ValueError)
    assert PASSWORD not in str(error)
    assert PASSWORD not in repr(error.args)
    return error


def received(request: vc.HTTPRequest) -> dict[str, str]:
    """The parameters as the service reads them off the wire: the SOAP body's
    operation element, the query string (GET) or the form (POST)."""
    if request.method == "GET":
        return dict(parse_qsl(urlsplit(request.path).query, keep_blank_values=True))
    if request.header("Content-Type") == "application/x-www-form-urlencoded":
        return dict(parse_qsl(request.body.decode("ascii"), keep_blank_values=True))
    body = etree.fromstring(request.body)[-1]
    return {etree.QName(node).localname: node.text or "" for node in body[0]}


def params_of_type(xsd_name: str) -> list[tuple[vc.Operation, str]]:
    return [
        (op, param.name)
        for op in vc.OPERATIONS
        for param in op.params
        if param.type.name == xsd_name
    ]


def _ids(item: tuple[vc.Operation, str]) -> str:
    return f"{item[0].name}.{item[1]}"


@pytest.mark.parametrize("bad", ["\x00", "\x1b", "\ud800", "\x08", "\ufffe", "\uffff", "\x7f\x0b"])
@pytest.mark.parametrize("target", params_of_type("string"), ids=_ids)
@by_validate
@by_binding
def test_characters_xml_cannot_carry_are_refused_naming_the_parameter(
    binding: vc.Binding, validate: bool, target: tuple[vc.Operation, str], bad: str
) -> None:
    op, name = target
    params = good_params(op)
    params[name] = f"ok{bad}ok"

    error = refused(binding, op, params, validate=validate)

    assert error.field == name
    assert name in str(error)
    assert error.operation == op.name


@by_binding
def test_tab_cr_lf_and_astral_characters_are_allowed(binding: vc.Binding) -> None:
    params = {"BadCheckId": 1, "CheckRejectReason": "a\tb\r\nc\U0010ffff\ue000"}

    request = encode(binding, "UpdatePrivateBadCheckRejectReason", params)

    assert received(request)["CheckRejectReason"] == "a\tb\r\nc\U0010ffff\ue000"


class Value(NamedTuple):
    value: str
    ok: bool


@pytest.mark.parametrize(
    "phone",
    [
        Value("1234567", ok=True),
        Value("123456789012345", ok=True),
        Value("123456", ok=False),
        Value("1234567890123456", ok=False),
        Value("555-123-4567", ok=False),
        Value("+15551234567", ok=False),
        Value("5551234567\n", ok=False),
        Value("", ok=False),
    ],
    ids=lambda phone: repr(phone.value),
)
@by_binding
def test_phone_number_must_be_7_to_15_digits(binding: vc.Binding, phone: Value) -> None:
    params = {"PhoneNumber": phone.value, "ConfirmationQuestion": "Pay?"}

    if phone.ok:
        encode(binding, SEND, params)
    else:
        assert refused(binding, SEND, params).field == "PhoneNumber"
        encode(binding, SEND, params, validate=False)


@pytest.mark.parametrize(
    "question",
    [
        Value("?", ok=True),
        Value("x" * 200, ok=True),
        Value("🎉" * 100, ok=True),
        Value("é" * 200, ok=True),
        Value("x" * 201, ok=False),
        Value("🎉" * 101, ok=False),
        Value("🎉" * 100 + "x", ok=False),
        Value("", ok=False),
    ],
    ids=["1", "200-ascii", "100-emoji", "200-e-acute", "201", "101-emoji", "201-units", "empty"],
)
@by_binding
def test_question_is_1_to_200_utf16_code_units(binding: vc.Binding, question: Value) -> None:
    params = {"PhoneNumber": "5551234567", "ConfirmationQuestion": question.value}

    if question.ok:
        encode(binding, SEND, params)
    else:
        assert refused(binding, SEND, params).field == "ConfirmationQuestion"
        encode(binding, SEND, params, validate=False)


@pytest.mark.parametrize("request_id", [0, 1, 2**31, 2**32 + 1, 2**63 - 1])
@by_binding
def test_request_ids_in_range_are_sent_as_decimal_text(
    binding: vc.Binding, request_id: int
) -> None:
    request = encode(binding, VERIFIED, {"RequestId": request_id})

    assert received(request) == {"RequestId": str(request_id)}


@by_binding
def test_negative_request_id_is_a_service_rule(binding: vc.Binding) -> None:
    assert refused(binding, VERIFIED, {"RequestId": -1}).field == "RequestId"
    encode(binding, VERIFIED, {"RequestId": -1}, validate=False)


WRONG_VALUES = [
    *[("long", value) for value in (2**63, -(2**63) - 1, 10**30)],
    *[("long", value) for value in ("42", True, False, 42.0, None, b"42")],
    *[("string", value) for value in (42, None, b"5551234567", ["x"])],
]


@pytest.mark.parametrize(("xsd_name", "wrong"), WRONG_VALUES, ids=repr)
@by_validate
@by_binding
def test_wrong_types_and_longs_outside_64_bits_are_refused_even_without_validation(
    binding: vc.Binding, validate: bool, xsd_name: str, wrong: object
) -> None:
    for op, name in params_of_type(xsd_name):
        params = good_params(op)
        params[name] = wrong

        assert refused(binding, op, params, validate=validate).field == name


@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
@by_binding
def test_unknown_parameter_names_are_refused(binding: vc.Binding, operation: vc.Operation) -> None:
    params = good_params(operation)
    params["requestid"] = 1

    error = refused(binding, operation, params, validate=False)

    assert error.field == "requestid"


@pytest.mark.parametrize("operation", [op for op in vc.OPERATIONS if op.params], ids=str)
@by_binding
def test_missing_parameters_are_refused(binding: vc.Binding, operation: vc.Operation) -> None:
    params = good_params(operation)
    missing = operation.param_names[-1]
    del params[missing]

    assert refused(binding, operation, params, validate=False).field == missing


@by_binding
def test_unknown_operation_is_refused(binding: vc.Binding) -> None:
    assert refused(binding, "SecureLink_Nope", {}).field == "operation"


@by_binding
def test_operation_names_are_case_insensitive_like_iis(binding: vc.Binding) -> None:
    lower = encode(binding, "getmobileconsenttext", {})
    exact = encode(binding, "GetMobileConsentText", {})

    assert lower == exact


DANGEROUS = ["<a", "x<Z", "<!--", "</b>", "<?xml", "&#60;", "&#x3C;"]
HARMLESS_ON_ASPNET = ["a < b", "<1", "<", "& #", "&amp;", "<é", ">"]


@pytest.mark.parametrize("value", DANGEROUS)
@pytest.mark.parametrize("binding", PLAIN_HTTP)
def test_aspnet_dangerous_values_are_refused_on_get_and_post_with_a_hint(
    binding: vc.Binding, value: str
) -> None:
    params = {"PhoneNumber": "5551234567", "ConfirmationQuestion": f"Pay {value}?"}

    error = refused(binding, SEND, params)

    assert error.field == "ConfirmationQuestion"
    assert "SOAP" in str(error)


@pytest.mark.parametrize("value", DANGEROUS)
@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
def test_soap_carries_values_aspnet_refuses_on_get_and_post(
    binding: vc.Binding, value: str
) -> None:
    params = {"PhoneNumber": "5551234567", "ConfirmationQuestion": f"Pay {value}?"}

    request = encode(binding, SEND, params)

    assert received(request) == params


@pytest.mark.parametrize("value", HARMLESS_ON_ASPNET)
@pytest.mark.parametrize("binding", PLAIN_HTTP)
def test_values_aspnet_lets_through_are_sent_on_get_and_post(
    binding: vc.Binding, value: str
) -> None:
    request = encode(binding, "RevokeMobileConsent", {"MobileNumber": value})

    assert received(request) == {"MobileNumber": value}


@pytest.mark.parametrize("binding", PLAIN_HTTP)
def test_dangerous_value_check_is_a_service_rule(binding: vc.Binding) -> None:
    params = {"MobileNumber": "<script>"}
    assert refused(binding, "RevokeMobileConsent", params).field == "MobileNumber"

    request = encode(binding, "RevokeMobileConsent", params, validate=False)

    assert received(request) == params


def test_password_never_shows_in_credentials_repr() -> None:
    assert PASSWORD not in repr(CREDENTIALS)
    assert PASSWORD not in str(CREDENTIALS)
    assert "api-user" in repr(CREDENTIALS)


@pytest.mark.parametrize("password", [f"{PASSWORD}\x00", f"{PASSWORD}\ud800", b"hunter2-Pa55word"])
def test_bad_password_is_refused_without_showing_it(password: object) -> None:
    with pytest.raises(vc.RequestValidationError) as caught:
        vc.Credentials("api-user", password)  # type: ignore[arg-type]

    assert caught.value.field == "ApiPassword"
    assert PASSWORD not in str(caught.value)
    assert PASSWORD not in repr(caught.value.args)
    assert caught.value.value is None


def test_bad_username_is_refused_naming_it() -> None:
    with pytest.raises(vc.RequestValidationError) as caught:
        vc.Credentials("api\x00user", PASSWORD)

    assert caught.value.field == "ApiUsername"
    assert PASSWORD not in str(caught.value)


@by_binding
def test_encoded_request_repr_hides_the_body_holding_the_password(binding: vc.Binding) -> None:
    request = encode(binding, "GetMobileConsentText", {})

    assert PASSWORD not in repr(request)
    assert PASSWORD.encode() in request.body or not binding.is_soap
