"""The one place XML is parsed, hardened, plus small helpers shared by codecs.

The parser opens nothing: every external entity or DTD libxml2 asks for is
answered by a resolver that hands back an empty document, the network is off,
and a document with a DOCTYPE or an entity declaration anywhere is refused
before libxml2 sees it. That check is made on the decoded text, and libxml2
is then given exactly that text as UTF-8 and told to read it as UTF-8: a
UTF-16 body, a declaration that names another encoding than the bytes are
in, or a DOCTYPE past the first kilobytes cannot get a declaration past it.
libxml2's default depth and size limits stay on; comments and processing
instructions are dropped so they cannot split text nodes.
"""

from __future__ import annotations

import codecs
import functools
import re
import threading
from typing import Any, Final

from lxml import etree

XSI_NS: Final = "http://www.w3.org/2001/XMLSchema-instance"
XSI_NIL: Final = f"{{{XSI_NS}}}nil"
SOAP11_ENV_NS: Final = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12_ENV_NS: Final = "http://www.w3.org/2003/05/soap-envelope"

_BOM: Final = b"\xef\xbb\xbf"
# Byte-order marks and the first bytes of "<?" in the encodings XML can
# recognise without a declaration (XML 1.0, appendix F), longest first.
_SIGNATURES: Final = (
    (b"\x00\x00\xfe\xff", "utf-32-be", 4),
    (b"\xff\xfe\x00\x00", "utf-32-le", 4),
    (b"\x00\x00\x00<", "utf-32-be", 0),
    (b"<\x00\x00\x00", "utf-32-le", 0),
    (b"\xfe\xff", "utf-16-be", 2),
    (b"\xff\xfe", "utf-16-le", 2),
    (b"\x00<", "utf-16-be", 0),
    (b"<\x00", "utf-16-le", 0),
    (_BOM, "utf-8", 3),
)
_SIGNATURE_STARTS: Final = frozenset({b"\x00", b"\xfe", b"\xff", b"\xef"})
# What ASMX sends: decided without a look further.
_USUAL_DECLARATION: Final = b'<?xml version="1.0" encoding="utf-8"?>'
_DECLARED: Final = re.compile(rb"""<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
# Either declaration, in any case: libxml2 knows only the upper-case ones, but
# nothing the service sends has "<!" followed by these words at all.
_FORBIDDEN: Final = re.compile(rb"<!\s*(?:doctype|entity)", re.IGNORECASE)
_FORBIDDEN_TEXT: Final = re.compile(r"<!\s*(?:doctype|entity)", re.IGNORECASE)


# .NET's XmlSerializer writes a control character in a string as a character
# reference ("&#x1;"), which XML 1.0 forbids and libxml2 refuses. Such a
# reference is read as a stand-in from Unicode's last private-use plane before
# parsing, and text read through ``text_of`` or ``restore`` turns it back.
_ILLEGAL_REFERENCE: Final = re.compile(rb"&#(?:[xX]0*([0-9A-Fa-f]{1,2})|0*([0-9]{1,2}));")
_STAND_IN_BASE: Final = 0x10FF00
_FROM_STAND_IN: Final = {_STAND_IN_BASE + code: code for code in range(0x20)}


def _stand_in(match: re.Match[bytes]) -> bytes:
    code = int(match[1], 16) if match[1] is not None else int(match[2])
    if code >= 0x20 or code in (0x9, 0xA, 0xD):
        return match[0]
    return chr(_STAND_IN_BASE + code).encode("utf-8")


class XmlRejected(ValueError):
    """The bytes are not a document we are willing to read (message says why)."""


class _RefuseAll(etree.Resolver):
    """Answers every request for an external DTD or entity with nothing:
    libxml2's own loader, which would open a local file, is never reached."""

    # lxml calls resolve() with a context the stubs do not know of.
    def resolve(  # type: ignore[override]
        self, system_url: str | None, public_id: str | None, context: Any
    ) -> Any:
        return self.resolve_string("", context)  # type: ignore[call-arg]


class _Parsers(threading.local):
    # lxml parser objects must not be shared between threads.
    def __init__(self) -> None:
        self.parser = etree.XMLParser(
            # libxml2 reads every document as UTF-8, whatever its declaration or
            # first bytes claim: the text it reads is the text checked here.
            encoding="utf-8",
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            dtd_validation=False,
            attribute_defaults=False,
            huge_tree=False,
            remove_comments=True,
            remove_pis=True,
            collect_ids=False,
        )
        self.parser.resolvers.add(_RefuseAll())


_parsers = _Parsers()


def _encoding_of(body: bytes) -> tuple[str, int]:
    """The encoding to read ``body`` in and the length of its byte-order mark."""
    if body.startswith(_USUAL_DECLARATION):
        return "utf-8", 0
    if body[:1] in _SIGNATURE_STARTS or body[1:2] == b"\x00":
        for signature, encoding, bom in _SIGNATURES:
            if body.startswith(signature):
                return encoding, bom
    declared = _DECLARED.match(body, 0, 200)
    if declared is None:
        return "utf-8", 0
    return _declared_encoding(declared.group(1).decode("ascii").lower()), 0


@functools.lru_cache(maxsize=64)
def _declared_encoding(name: str) -> str:
    try:
        encoding = codecs.lookup(name).name
    except LookupError:
        raise XmlRejected(f"unknown encoding {name!r}") from None
    if "16" in encoding or "32" in encoding:
        # The bytes start with ASCII "<?xml": whatever the declaration says,
        # they are not UTF-16 or UTF-32. Read them as libxml2 does, as UTF-8.
        return "utf-8"
    return "utf-8" if encoding in ("ascii", "utf-8") else encoding


def _safe_bytes(body: bytes) -> bytes:
    """The document as UTF-8 bytes libxml2 reads exactly as checked here."""
    encoding, bom = _encoding_of(body)
    if encoding == "utf-8":
        # The usual answer: UTF-8 is ASCII-transparent, so a search of the
        # bytes is a search of the text, and the bytes go to libxml2 unchanged.
        if body.find(b"<!", bom) != -1 and _FORBIDDEN.search(body, bom):
            raise XmlRejected("a DOCTYPE or entity declaration is not allowed")
        return body
    try:
        text = body[bom:].decode(encoding)
        if _FORBIDDEN_TEXT.search(text):
            raise XmlRejected("a DOCTYPE or entity declaration is not allowed")
        return text.encode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError) as exc:
        raise XmlRejected(f"not valid {encoding}: {exc.reason}") from None


def parse(body: bytes) -> etree._Element:
    """Parse a response body safely; raise XmlRejected for anything else."""
    safe = _safe_bytes(body)
    if b"&#" in safe:
        safe = _ILLEGAL_REFERENCE.sub(_stand_in, safe)
    try:
        root = etree.fromstring(safe, _parsers.parser)
    except etree.XMLSyntaxError as exc:
        raise XmlRejected(f"malformed XML: {exc}") from None
    except (ValueError, TypeError, MemoryError) as exc:
        raise XmlRejected(f"unreadable XML: {exc}") from None
    docinfo: Any = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
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
    return restore("".join(str(piece) for piece in element.itertext()))


def restore(text: str) -> str:
    """``text`` with the control characters the service wrote as references."""
    return text.translate(_FROM_STAND_IN)


_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#xD;"})
_ESCAPES_RAW_CR: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape(text: str, *, cr_as_reference: bool = True) -> str:
    """Escape text for element content. CR is written as a reference so that
    it survives parsing; ``cr_as_reference=False`` writes it raw, as .NET's
    XmlWriter does (a parser then delivers a lone CR, or CRLF, as LF)."""
    # Most texts (every number, most names) have nothing to escape: four
    # scans of a short string cost a tenth of translate()'s lookup per character.
    if "&" not in text and "<" not in text and ">" not in text and "\r" not in text:
        return text
    return text.translate(_ESCAPES if cr_as_reference else _ESCAPES_RAW_CR)


def escape_attr(text: str) -> str:
    """Escape text for a double-quoted attribute value."""
    return escape(text).replace('"', "&quot;")


def strip_bom(body: bytes) -> bytes:
    return body[3:] if body.startswith(_BOM) else body
