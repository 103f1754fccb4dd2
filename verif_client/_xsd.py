"""The XML Schema simple types the service uses, both directions.

Reading follows the lexical forms .NET writes (``1E-05``, ``INF``, ``NaN``,
``true``/``1``); writing produces what .NET reads. Python's ``float()`` accepts
spellings XML Schema does not (``inf``, ``1_0``), so doubles go through a regex.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, Generic

import attrs

from ._compat import TypeVar

LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1
INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1

# Characters XML 1.0 allows; anything else cannot be carried in a document.
# The complement of XML 1.0's Char production, spelled as the few ranges it
# excludes: the negated class over the whole of Unicode takes ~5 ms to compile,
# a good part of the import time (docs/performance.md: start-up).
_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# ASCII digits only: Python's \d and int()/float() also accept other scripts' digits.
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Significant digits of the largest xsd:long; more can only be out of range.
_LONG_DIGITS = 19
_SHOWN = 40
_XML_WS = " \t\r\n"


def first_non_xml_char(text: str) -> int | None:
    """Index of the first character XML 1.0 cannot carry, or None."""
    match = _NOT_XML_CHAR.search(text)
    return match.start() if match else None


def utf16_length(text: str) -> int:
    """.NET's ``string.Length``: UTF-16 code units, so a character outside the BMP counts 2."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


# A bare ``XsdType`` means ``XsdType[Any]``: code generic over every type needs no parameter.
_T = TypeVar("_T", default=Any)


class LexicalError(ValueError):
    """A wire value is not in the lexical space of its type (message says why)."""


@attrs.frozen
class XsdType(Generic[_T]):
    """One simple type: its name and the two conversions."""

    name: str
    parse: Callable[[str], _T]
    format: Callable[[object], str]

    def __repr__(self) -> str:
        return f"xsd:{self.name}"


def _parse_string(text: str) -> str:
    return text


def _format_string(value: object) -> str:
    assert isinstance(value, str)
    return value


def _shown(text: str) -> str:
    """A wire value for an error message, cut short: answers can be megabytes."""
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "\u2026")


def _parse_integer(text: str, low: int, high: int, name: str) -> int:
    token = text.strip(_XML_WS)
    if not _INTEGER.fullmatch(token):
        raise LexicalError(f"{_shown(text)} is not an xsd:{name}")
    # int() raises a plain ValueError past 4300 digits, leading zeros included, so
    # they go first; more significant digits than a long has are out of range anyway.
    significant = token.lstrip("+-").lstrip("0") or "0"
    if len(significant) > _LONG_DIGITS:
        raise LexicalError(f"{_shown(token)} is outside the xsd:{name} range")
    number = -int(significant) if token.startswith("-") else int(significant)
    if not low <= number <= high:
        raise LexicalError(f"{number} is outside the xsd:{name} range")
    return number


def _parse_long(text: str) -> int:
    return _parse_integer(text, LONG_MIN, LONG_MAX, "long")


def _parse_int(text: str) -> int:
    return _parse_integer(text, INT_MIN, INT_MAX, "int")


def _format_integer(value: object) -> str:
    assert isinstance(value, int)
    return str(value)


def _parse_boolean(text: str) -> bool:
    token = text.strip(_XML_WS)
    if token in ("true", "1"):
        return True
    if token in ("false", "0"):
        return False
    raise LexicalError(f"{_shown(text)} is not an xsd:boolean")


def _format_boolean(value: object) -> str:
    return "true" if value else "false"


_DOUBLE_SPECIALS: Final = {
    "INF": float("inf"),
    "+INF": float("inf"),
    "-INF": float("-inf"),
    "NaN": float("nan"),
}


def _parse_double(text: str) -> float:
    token = text.strip(_XML_WS)
    special = _DOUBLE_SPECIALS.get(token)
    if special is not None:
        return special
    if not _DOUBLE.fullmatch(token):
        raise LexicalError(f"{_shown(text)} is not an xsd:double")
    return float(token)


def _format_double(value: object) -> str:
    assert isinstance(value, float | int)
    number = float(value)
    if number != number:
        return "NaN"
    if number in (float("inf"), float("-inf")):
        return "INF" if number > 0 else "-INF"
    return repr(number)


STRING: Final = XsdType("string", _parse_string, _format_string)
LONG: Final = XsdType("long", _parse_long, _format_integer)
INT: Final = XsdType("int", _parse_int, _format_integer)
BOOLEAN: Final = XsdType("boolean", _parse_boolean, _format_boolean)
DOUBLE: Final = XsdType("double", _parse_double, _format_double)
