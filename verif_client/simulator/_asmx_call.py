"""What the simulator reads a request into, before ASMX's rules are applied.

A :class:`Request` is what the ASGI layer (or the in-process transport) read
off the wire; a :class:`Call` is what ASMX made of it: an operation and its
converted parameters, or the error answer it gives instead. The helpers here
are the few readings both bindings' readers share (_asmx_form, _asmx_soap).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from .. import _xsd
from .._operations import Operation
from . import _responses as r

_INT64: Final = re.compile(r"[ \t\r\n]*[+-]?[0-9]+[ \t\r\n]*")
CLR_NAMES: Final = {"long": "System.Int64", "int": "System.Int32", "string": "System.String"}
MAX_QUERY_LENGTH: Final = 2048  # ASP.NET's default maxQueryStringLength
MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024  # ASP.NET's default maxRequestLength


@attrs.frozen(slots=True)
class Request:
    """What the ASGI layer read: method, decoded path, raw query, headers, body."""

    method: str
    path: str
    query: bytes
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    host: str
    scheme: str = "http"
    repeated: frozenset[str] = frozenset()
    """Header names (lower-cased) the request carried more than once."""
    server_host: str | None = None
    """The address the simulator serves on (the bound host), if known."""
    too_large: bool = False
    """The body was over ASP.NET's request limit and was not kept."""


def header_map(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str], frozenset[str]]:
    """Headers by lower-cased name (repeats joined with ", ", as ASP.NET reads
    them) and the names that were repeated."""
    headers: dict[str, str] = {}
    repeated: set[str] = set()
    for name, value in pairs:
        key = name.lower()
        if key in headers:
            repeated.add(key)
            headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    return headers, frozenset(repeated)


@attrs.frozen(slots=True)
class Call:
    """One operation call as read from the wire, or the error answer instead."""

    binding: str
    operation: Operation | None = None
    params: Mapping[str, str] = attrs.field(factory=dict)
    values: Mapping[str, object] = attrs.field(factory=dict)
    credentials_present: bool = False
    username: str | None = None
    soap_action: str | None = None
    content_type: str | None = None
    error: r.Response | None = None


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def convert(xsd: _xsd.XsdType, text: str) -> object:
    """A parameter's text as .NET converts it (Int64.Parse trims XML whitespace)."""
    if xsd is _xsd.STRING:
        return text
    if xsd is _xsd.LONG or xsd is _xsd.INT:
        if not _INT64.fullmatch(text):
            raise _xsd.LexicalError(text)
        number = int(text.strip())
        low, high = (
            (_xsd.LONG_MIN, _xsd.LONG_MAX) if xsd is _xsd.LONG else (_xsd.INT_MIN, _xsd.INT_MAX)
        )
        if not low <= number <= high:
            raise _xsd.LexicalError(text)
        return number
    return xsd.parse(text)
