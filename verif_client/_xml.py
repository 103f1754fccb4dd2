"""The one place XML is parsed, hardened, plus small helpers shared by codecs.

The parser never loads a DTD, never resolves an entity, never touches the
network, refuses documents with a DOCTYPE at all (the service never sends
one), keeps libxml2's default depth and size limits, and drops comments and
processing instructions so they cannot split text nodes.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from lxml import etree

XSI_NS: Final = "http://www.w3.org/2001/XMLSchema-instance"
XSI_NIL: Final = f"{{{XSI_NS}}}nil"
SOAP11_ENV_NS: Final = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12_ENV_NS: Final = "http://www.w3.org/2003/05/soap-envelope"

_BOM: Final = b"\xef\xbb\xbf"


class XmlRejected(ValueError):
    """The bytes are not a document we are willing to read (message says why)."""


class _Parsers(threading.local):
    # lxml parser objects must not be shared between threads.
    def __init__(self) -> None:
        self.parser = etree.XMLParser(
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            dtd_validation=False,
            huge_tree=False,
            remove_comments=True,
            remove_pis=True,
            collect_ids=False,
        )


_parsers = _Parsers()


def parse(body: bytes) -> etree._Element:
    """Parse a response body safely; raise XmlRejected for anything else."""
    # "<!" must be there for either declaration: one scan without a copy
    # decides for the usual answer, which has none.
    if body.find(b"<!", 0, 4096) != -1 and (
        b"<!DOCTYPE" in body[:4096] or b"<!ENTITY" in body[:4096]
    ):
        raise XmlRejected("a DOCTYPE or entity declaration is not allowed")
    try:
        root = etree.fromstring(body, _parsers.parser)
    except etree.XMLSyntaxError as exc:
        raise XmlRejected(f"malformed XML: {exc}") from None
    except (ValueError, TypeError, MemoryError) as exc:
        raise XmlRejected(f"unreadable XML: {exc}") from None
    docinfo: Any = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise XmlRejected("a DOCTYPE is not allowed")
    return root


def local_name(tag: object) -> str:
    """Local part of an element's tag; '' for comments and other non-elements."""
    if not isinstance(tag, str):
        return ""
    return tag[tag.rfind("}") + 1 :]


def child(element: etree._Element, name: str) -> etree._Element | None:
    """First child element with this local name, whatever its namespace."""
    for candidate in element:
        if local_name(candidate.tag) == name:
            return candidate
    return None


def first_element_child(element: etree._Element) -> etree._Element | None:
    for candidate in element:
        if isinstance(candidate.tag, str):
            return candidate
    return None


def is_nil(element: etree._Element) -> bool:
    return element.get(XSI_NIL) in ("true", "1")


def text_of(element: etree._Element) -> str:
    """All text inside an element (mixed content joined, as .NET reads it)."""
    return "".join(str(piece) for piece in element.itertext())


_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#xD;"})


def escape(text: str) -> str:
    """Escape text for element content; CR is kept as a reference so it survives."""
    return text.translate(_ESCAPES)


def escape_attr(text: str) -> str:
    """Escape text for a double-quoted attribute value."""
    return escape(text).replace('"', "&quot;")


def strip_bom(body: bytes) -> bytes:
    return body[3:] if body.startswith(_BOM) else body
