"""Writing answers the way ASMX writes them, generic over the operation table.

SOAP envelopes come out on one line (ASMX's SOAP writer does not indent); the
bare HTTP GET/POST documents are indented with two spaces and CRLF, as
XmlSerializer does on Windows. Value types that may be null (``bool?``,
``double?``, ``int?``) are written ``xsi:nil="true"``; null strings and null
records are left out. A CR in a string is written raw, as .NET's XmlWriter
writes it: a client's parser reads it as LF. A character XML 1.0 does not
allow (a control character, U+FFFE) is written as a character reference,
``&#x1;``, as XmlSerializer does: well-formed XML no longer, and a client
must cope. This module deliberately does not reuse the client's
formatting code, so that a bug on one side shows up against the other.
"""

from __future__ import annotations

import math
import re
from typing import Final

from .. import _xml, _xsd
from .._operations import Field, Operation, Record, ResultShape

XSI_NS: Final = "http://www.w3.org/2001/XMLSchema-instance"
XSD_NS: Final = "http://www.w3.org/2001/XMLSchema"
DECLARATION: Final = '<?xml version="1.0" encoding="utf-8"?>'
_SCHEMA_NS_DECLS: Final = f'xmlns:xsi="{XSI_NS}" xmlns:xsd="{XSD_NS}"'
_CRLF: Final = "\r\n"

SOAP_ENVELOPES: Final = {"soap11": _xml.SOAP11_ENV_NS, "soap12": _xml.SOAP12_ENV_NS}
_SOAP12_CODES: Final = {"Client": "Sender", "Server": "Receiver"}
_NOT_XML_CHAR: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def content_text(value: str) -> str:
    """Element content as .NET's XmlTextWriter writes it (see the module's notes)."""
    escaped = _xml.escape(value, cr_as_reference=False)
    return _NOT_XML_CHAR.sub(lambda m: f"&#x{ord(m.group()):X};", escaped)


def dotnet_double(value: float) -> str:
    """.NET Framework's round-trip ("R") form: 15 digits if they suffice, else 17."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    if value == 0:
        return "0"  # .NET Framework does not keep the sign of zero
    text = f"{value:.15G}"
    if float(text) != value:
        text = f"{value:.17G}"
    return text


def format_simple(xsd: _xsd.XsdType, value: object) -> str:
    if xsd is _xsd.DOUBLE:
        assert isinstance(value, float | int)
        return dotnet_double(float(value))
    if xsd is _xsd.BOOLEAN:
        return "true" if value else "false"
    if xsd is _xsd.LONG or xsd is _xsd.INT:
        assert isinstance(value, int)
        return str(value)
    assert isinstance(value, str)
    return value


def is_nullable_value(field: Field) -> bool:
    """A .NET ``Nullable<T>``: a value type the table allows to be missing."""
    return (
        isinstance(field.type, _xsd.XsdType)
        and field.type is not _xsd.STRING
        and (not field.required)
    )


class _Writer:
    """Appends elements to a list of strings, indented or not."""

    def __init__(self, indent: bool) -> None:
        self.parts: list[str] = []
        self.indent = indent

    def _pad(self, depth: int) -> str:
        return _CRLF + "  " * depth if self.indent else ""

    def record_children(self, record: Record, value: object, depth: int) -> bool:
        """Write the fields of a record value; True if anything was written."""
        wrote = False
        for field in record.fields:
            wrote |= self.field(field, getattr(value, field.attr), depth)
        return wrote

    def field(self, field: Field, value: object, depth: int) -> bool:
        name = field.element
        if isinstance(field.type, Record):
            if value is None:
                return False
            self.parts.append(f"{self._pad(depth)}<{name}")
            self.parts.append(">")
            mark = len(self.parts)
            if self.record_children(field.type, value, depth + 1):
                self.parts.append(f"{self._pad(depth)}</{name}>")
            else:
                del self.parts[mark - 1 :]
                self.parts.append(" />")
            return True
        if value is None:
            if not is_nullable_value(field):
                return False
            self.parts.append(f'{self._pad(depth)}<{name} xsi:nil="true" />')
            return True
        text = content_text(format_simple(field.type, value))
        self.parts.append(
            f"{self._pad(depth)}<{name}>{text}</{name}>"
            if text
            else f"{self._pad(depth)}<{name} />"
        )
        return True


def soap_response(op: Operation, value: object, namespace: str, binding: str) -> bytes:
    writer = _Writer(indent=False)
    ns = _xml.escape_attr(namespace)
    result = Field(op.result_element, "", op.result)
    writer.parts.append(f'<{op.response_element} xmlns="{ns}">')
    if writer.field(result, value, 0):
        writer.parts.append(f"</{op.response_element}>")
    else:
        writer.parts[-1] = f'<{op.response_element} xmlns="{ns}" />'
    return _envelope(binding, "".join(writer.parts))


def _envelope(binding: str, body: str) -> bytes:
    env = SOAP_ENVELOPES[binding]
    return (
        f'{DECLARATION}<soap:Envelope xmlns:soap="{env}" {_SCHEMA_NS_DECLS}>'
        f"<soap:Body>{body}</soap:Body></soap:Envelope>"
    ).encode()


def bare_response(op: Operation, value: object, namespace: str) -> bytes:
    ns = _xml.escape_attr(namespace)
    root = op.bare_root
    shape: ResultShape = op.result
    if isinstance(shape, Record):
        writer = _Writer(indent=True)
        opening = f'<{root} {_SCHEMA_NS_DECLS} xmlns="{ns}"'
        if writer.record_children(shape, value, 1):
            document = f"{opening}>{''.join(writer.parts)}{_CRLF}</{root}>"
        else:
            document = f"{opening} />"
    elif value is None:
        document = f'<{root} xsi:nil="true" xmlns:xsi="{XSI_NS}" xmlns="{ns}" />'
    else:
        text = content_text(format_simple(shape, value))
        document = f'<{root} xmlns="{ns}">{text}</{root}>'
    return f"{DECLARATION}{_CRLF}{document}".encode()


def soap_fault(binding: str, code: str, reason: str) -> bytes:
    """A fault as ASMX writes it; ``code`` is the SOAP 1.1 name (Client/Server/...)."""
    text = content_text(reason)
    if binding == "soap11":
        fault = (
            f"<soap:Fault><faultcode>soap:{code}</faultcode>"
            f"<faultstring>{text}</faultstring><detail /></soap:Fault>"
        )
    else:
        fault = (
            f"<soap:Fault><soap:Code><soap:Value>soap:{_SOAP12_CODES.get(code, code)}"
            f'</soap:Value></soap:Code><soap:Reason><soap:Text xml:lang="en">{text}'
            "</soap:Text></soap:Reason><soap:Detail /></soap:Fault>"
        )
    return _envelope(binding, fault)
