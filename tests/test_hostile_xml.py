"""Hostile XML is refused with DecodeError, without reading files or the network.

These run without timing assertions: a decoder that expanded entities or
fetched a DTD would hang or blow up the suite rather than pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import asmx
import pytest

import verif_client as vc

MARKER = "MARKER-7f3a9c-secret-file-content"

Payload = Callable[[vc.Binding, vc.Operation, Path], bytes]


def _answer_with(binding: vc.Binding, op: vc.Operation, prologue: str, value: str) -> bytes:
    """A valid answer for ``op`` with ``prologue`` after the declaration and
    ``value`` (typically an entity reference) inside the first text field."""
    content = {
        "SecureLink_Confirmation_SendRequestViaSms": (
            f"<SecureLinkRequestId>1</SecureLinkRequestId><ErrorMessage>{value}</ErrorMessage>"
        ),
        "SecureLink_SecurityCode_HasBeenVerified": f"<ErrorMessage>{value}</ErrorMessage>",
        "SecureLink_MobileLocation_GetResult": f"<ErrorMessage>{value}</ErrorMessage>",
        "UpdatePrivateBadCheckRejectReason": f"true{value}",
        "RevokeMobileConsent": f"true{value}",
        "GetMobileConsentText": value,
    }[op.name]
    document = asmx.response(binding, op, content).decode()
    root_start = document.index("?>") + 2
    return (document[:root_start] + prologue + document[root_start:]).encode()


def _root_name(binding: vc.Binding, op: vc.Operation) -> str:
    return "soap:Envelope" if binding.is_soap else op.bare_root


def xxe_local_file(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    root = _root_name(binding, op)
    dtd = f'<!DOCTYPE {root} [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>'
    return _answer_with(binding, op, dtd, "&xxe;")


def xxe_network(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    root = _root_name(binding, op)
    dtd = f'<!DOCTYPE {root} [<!ENTITY xxe SYSTEM "http://127.0.0.1:9/x">]>'
    return _answer_with(binding, op, dtd, "&xxe;")


def parameter_entity(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    root = _root_name(binding, op)
    dtd = f'<!DOCTYPE {root} [<!ENTITY % p SYSTEM "{secret.as_uri()}"> %p;]>'
    return _answer_with(binding, op, dtd, "x")


def billion_laughs(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    levels = ['<!ENTITY lol0 "lol">']
    levels += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    dtd = f"<!DOCTYPE {_root_name(binding, op)} [{''.join(levels)}]>"
    return _answer_with(binding, op, dtd, "&lol9;")


def billion_laughs_in_a_late_attribute(
    binding: vc.Binding, op: vc.Operation, secret: Path
) -> bytes:
    # Attribute values have entities replaced even when text content does not,
    # and a DOCTYPE after a long comment gets past any quick look at the start.
    levels = ['<!ENTITY lol0 "lol">']
    levels += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    prologue = f"<!--{' ' * 10_000}--><!DOCTYPE {_root_name(binding, op)} [{''.join(levels)}]>"
    return _answer_with(binding, op, prologue, '<x a="&lol9;"/>')


def quadratic_blowup(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    dtd = f'<!DOCTYPE {_root_name(binding, op)} [<!ENTITY a "{"A" * 50_000}">]>'
    return _answer_with(binding, op, dtd, "&a;" * 20_000)


def external_dtd(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    dtd = f'<!DOCTYPE {_root_name(binding, op)} SYSTEM "http://127.0.0.1:9/evil.dtd">'
    return _answer_with(binding, op, dtd, "x")


def harmless_doctype(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    return _answer_with(binding, op, f"<!DOCTYPE {_root_name(binding, op)}>", "x")


def doctype_after_a_long_comment(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    # Pushes the DOCTYPE past any quick look at the first few kilobytes.
    root = _root_name(binding, op)
    prologue = f'<!--{" " * 10_000}--><!DOCTYPE {root} [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>'
    return _answer_with(binding, op, prologue, "&xxe;")


def deep_nesting(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    return _answer_with(binding, op, "", "<x>" * 10_000 + "</x>" * 10_000)


def nesting_just_past_the_limit(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    # Past libxml2's default depth of 256, well under the 2,048 of its "huge" mode.
    return _answer_with(binding, op, "", "<x>" * 300 + "</x>" * 300)


def undeclared_entity(binding: vc.Binding, op: vc.Operation, secret: Path) -> bytes:
    return _answer_with(binding, op, "", "&xxe;")


DECLARATION_REFUSED = "a DOCTYPE or entity declaration is not allowed"
TOO_DEEP = "malformed XML: Excessive depth in document: 256"

# Each payload and the hardening's own words for refusing it: not any DecodeError will do.
REFUSALS: dict[Payload, str] = {
    xxe_local_file: DECLARATION_REFUSED,
    xxe_network: DECLARATION_REFUSED,
    parameter_entity: DECLARATION_REFUSED,
    billion_laughs: DECLARATION_REFUSED,
    billion_laughs_in_a_late_attribute: DECLARATION_REFUSED,
    quadratic_blowup: DECLARATION_REFUSED,
    external_dtd: DECLARATION_REFUSED,
    harmless_doctype: DECLARATION_REFUSED,
    doctype_after_a_long_comment: DECLARATION_REFUSED,
    deep_nesting: TOO_DEEP,
    nesting_just_past_the_limit: TOO_DEEP,
    undeclared_entity: "malformed XML: Entity 'xxe' not defined",
}
PAYLOADS: list[Payload] = list(REFUSALS)


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(MARKER)
    return path


def test_payload_builder_makes_valid_answers(secret_file: Path) -> None:
    # Guards the payloads themselves: without the prologue and entity they decode.
    for binding in vc.Binding:
        for op in vc.OPERATIONS:
            result = asmx.decode(binding, op, _answer_with(binding, op, "", ""))
            assert result is not None


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda payload: payload.__name__)
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
def test_hostile_answer_is_refused_by_the_hardening_as_a_decode_error(
    operation: vc.Operation, binding: vc.Binding, payload: Payload, secret_file: Path
) -> None:
    body = payload(binding, operation, secret_file)

    with pytest.raises(vc.DecodeError) as caught:
        asmx.decode(binding, operation, body)

    assert str(caught.value).startswith(f"{operation.name}: {REFUSALS[payload]}")
    assert MARKER not in str(caught.value)
    assert MARKER not in repr(caught.value.args)


@pytest.mark.parametrize("payload", [xxe_local_file, doctype_after_a_long_comment])
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("status", [400, 500])
def test_hostile_error_answer_never_shows_the_file(
    binding: vc.Binding, status: int, payload: Payload, secret_file: Path
) -> None:
    op = vc.get_operation("GetMobileConsentText")

    with pytest.raises(vc.VerifClientError) as caught:
        asmx.decode(binding, op, payload(binding, op, secret_file), status=status)

    assert MARKER not in str(caught.value)
