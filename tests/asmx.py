"""Hand-made answers in the shape ASMX writes them (see service-notes.md).

These builders are test-side only: they never call the code under test, so a
decode test compares the library against what a real server sends.
"""

from __future__ import annotations

from lxml import etree

import verif_client as vc

NS = "http://api.giact.com/verificationservices/v5"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
XSD = "http://www.w3.org/2001/XMLSchema"
SOAP11_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12_ENV = "http://www.w3.org/2003/05/soap-envelope"
ENVELOPE_NS = {vc.Binding.SOAP11: SOAP11_ENV, vc.Binding.SOAP12: SOAP12_ENV}
DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'
BOM = b"\xef\xbb\xbf"

SOAP_CONTENT_TYPE = {
    vc.Binding.SOAP11: "text/xml; charset=utf-8",
    vc.Binding.SOAP12: "application/soap+xml; charset=utf-8",
}


def content_type(binding: vc.Binding) -> str:
    return SOAP_CONTENT_TYPE.get(binding, "text/xml; charset=utf-8")


def headers(binding: vc.Binding) -> dict[str, str]:
    return {"Content-Type": content_type(binding)}


def envelope(binding: vc.Binding, body_xml: str, *, prefix: str = "soap") -> bytes:
    """A SOAP envelope as ASMX writes it, around ``body_xml``."""
    return (
        f'{DECLARATION}<{prefix}:Envelope xmlns:{prefix}="{ENVELOPE_NS[binding]}"'
        f' xmlns:xsi="{XSI}" xmlns:xsd="{XSD}"><{prefix}:Body>{body_xml}'
        f"</{prefix}:Body></{prefix}:Envelope>"
    ).encode()


def response(binding: vc.Binding, op: vc.Operation, content: str, *, prefix: str = "soap") -> bytes:
    """A successful answer whose result element holds ``content``."""
    if binding.is_soap:
        return envelope(
            binding,
            f'<{op.name}Response xmlns="{NS}"><{op.name}Result>{content}'
            f"</{op.name}Result></{op.name}Response>",
            prefix=prefix,
        )
    return (
        f'{DECLARATION}<{op.bare_root} xmlns:xsi="{XSI}" xmlns:xsd="{XSD}" xmlns="{NS}">'
        f"{content}</{op.bare_root}>"
    ).encode()


def pretty(document: bytes, *, newline: bytes = b"\n") -> bytes:
    """The same document indented, as ASMX does when pretty-printing is on."""
    parser = etree.XMLParser(remove_blank_text=True)
    tree = etree.fromstring(document, parser).getroottree()
    text = etree.tostring(tree, pretty_print=True, xml_declaration=True, encoding="utf-8")
    return text.replace(b"\n", newline)


def decode(binding: vc.Binding, op: vc.Operation, body: bytes, status: int = 200) -> object:
    return vc.codec_for(binding).decode(op, status, headers(binding), body)


def op_named(name: str) -> vc.Operation:
    return vc.get_operation(name)
