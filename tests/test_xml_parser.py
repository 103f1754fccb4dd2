"""The hardened parser in the encodings a peer may use, what it reads, and the
layer beneath the DOCTYPE check: bytes in, a value or the parser's own words out."""

from __future__ import annotations

from pathlib import Path

import asmx
import pytest
from lxml import etree

import verif_client as vc
from verif_client import _xml

CONSENT = vc.get_operation("GetMobileConsentText")
VERIFIED = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
LOCATION = vc.get_operation("SecureLink_MobileLocation_GetResult")
REFUSED = "a DOCTYPE or entity declaration is not allowed"
DOCTYPE = '<!DOCTYPE string [<!ENTITY e "boom">]>'
LATIN1 = '<?xml version="1.0" encoding="ISO-8859-1"?>'


def bare(root: str, content: str) -> str:
    return f'<{root} xmlns="{asmx.NS}" xmlns:xsi="{_xml.XSI_NS}">{content}</{root}>'


def consent(text: str) -> str:
    return bare(CONSENT.bare_root, text)


def decode(op: vc.Operation, body: bytes) -> object:
    return asmx.decode(vc.Binding.HTTP_GET, op, body)


def refusal(op: vc.Operation, body: bytes) -> str:
    with pytest.raises(vc.DecodeError) as caught:
        decode(op, body)
    return str(caught.value).removeprefix(f"{op.name}: ")


def parse_refusal(body: bytes) -> str:
    # UTF-16 bodies: the codecs take them for a non-XML page before parsing;
    # the parser's own guard is shown on its own.
    with pytest.raises(_xml.XmlRejected) as caught:
        _xml.parse(body)
    return str(caught.value)


@pytest.mark.parametrize(
    "body",
    [
        ("\ufeff" + DOCTYPE + consent("&e;")).encode("utf-16-le"),
        ("\ufeff" + DOCTYPE + consent("&e;")).encode("utf-16-be"),
        (DOCTYPE + consent("&e;")).encode("utf-16-le"),
        (LATIN1 + DOCTYPE + consent("&e;")).encode("latin-1"),
        b"\xef\xbb\xbf" + (DOCTYPE + consent("&e;")).encode(),
        (DOCTYPE + consent("&e;")).encode(),
        (" " + DOCTYPE + consent("&e;")).encode(),
        ('<!DOCTYPE string SYSTEM "file:///etc/passwd">' + consent("x")).encode(),
    ],
    ids=[
        "utf16le-bom",
        "utf16be-bom",
        "utf16le",
        "latin1",
        "utf8-bom",
        "no-declaration",
        "space",
        "first-byte-external",
    ],
)
def test_a_doctype_is_refused_before_parsing_in_any_encoding(body: bytes) -> None:
    assert parse_refusal(body) == REFUSED


@pytest.mark.parametrize(
    ("declared", "text"),
    [("ISO-8859-1", "caf\u00e9"), ("windows-1252", "\u20ac 5"), ("iso-8859-15", "\u20ac 5")],
)
def test_a_declared_single_byte_encoding_is_read_as_declared(declared: str, text: str) -> None:
    body = f'<?xml version="1.0" encoding="{declared}"?>{consent(text)}'.encode(declared)

    assert decode(CONSENT, body) == text


def test_utf16_with_and_without_a_byte_order_mark_reads_back() -> None:
    with_bom = ("\ufeff" + consent("h\u00e9")).encode("utf-16-le")
    without = consent("h\u00e9").encode("utf-16-be")
    for body in (with_bom, without):
        assert _xml.parse(body).text == "h\u00e9"


def test_bytes_that_are_not_the_declared_encoding_are_refused_saying_so() -> None:
    odd = ("\ufeff" + consent("x")).encode("utf-16-le") + b"\x00"
    unknown = f'<?xml version="1.0" encoding="x-no-such"?>{consent("x")}'.encode()

    assert parse_refusal(odd).startswith("not valid utf-16-le: ")
    assert refusal(CONSENT, unknown) == "unknown encoding 'x-no-such'"


def test_nil_is_read_in_both_spellings_and_mixed_content_is_joined() -> None:
    for nil in ("true", "1"):
        body = bare(VERIFIED.bare_root, f'<Verified xsi:nil="{nil}" />').encode()
        assert decode(VERIFIED, body) == vc.VerificationResult(verified=None)
        located = bare(LOCATION.bare_root, f'<LocationResult xsi:nil="{nil}" />').encode()
        assert decode(LOCATION, located) == vc.LocationResult(location=None)
    mixed = bare(VERIFIED.bare_root, "<ErrorMessage>a<b>b</b>c</ErrorMessage>").encode()
    assert decode(VERIFIED, mixed) == vc.VerificationResult(verified=None, error_message="abc")


def test_beneath_the_doctype_check_the_parser_expands_and_loads_nothing(tmp_path: Path) -> None:
    # Should the check before it ever miss a declaration, libxml2 itself must
    # not act on one: no entity expanded, no DTD read, no default attribute.
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY file "FROM-THE-DTD"><!ATTLIST a added CDATA "DEFAULTED">')
    document = (
        f'<!DOCTYPE a SYSTEM "{dtd.as_uri()}" [<!ENTITY inline "EXPANDED">]><a>&inline;&file;</a>'
    ).encode()

    root = etree.fromstring(document, _xml._parsers.parser)

    assert root.get("added") is None
    assert "".join(root.itertext()) == "&inline;&file;"
