"""Taking our secrets out of whatever the service sends back.

A server that echoes the request (into a fault text, a 500 page, a garbled
answer) would hand our password back to us, and from there into an error
message, a log record, the CLI's output, the bulk output file and the journal.
Everything the service sends passes through here first: the body bytes before
any text is cut from them (a cut could keep half a password), then the texts
of the error raised, which may also hold text from the network layer.
"""

from __future__ import annotations

import functools
import html.entities
import re
from collections.abc import Iterable
from typing import Any, Final, TypeVar, cast

import attrs

from ._errors import VerifClientError

MASK: Final = "***"
_ERROR_TEXTS: Final = ("message", "reason", "detail", "server_message", "element")
# A secret this short could be any run of letters in a path or a word: it is
# masked only where it stands as a whole word (SECURITY.md, Where credentials go).
SHORT: Final = 6
_WORD_CHAR: Final = "[0-9A-Za-z]"
_BACKSLASHES: Final = r"\\+"  # one or more: an escape may be escaped again
# An entity's "&" may itself come escaped (XML in XML, HTML in JSON, a URL).
_AMPERSAND: Final = r"(?:&|\\+u0026|%26)(?:amp;)*"
# The characters every encoding other than the raw one starts with.
_ENCODING: Final = re.compile(r"[&%\\+]")
_ENCODING_BYTES: Final = re.compile(_ENCODING.pattern.encode())
_SHORT_ESCAPES: Final = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "\n": "n",
    "\r": "r",
    "\t": "t",
    "\b": "b",
    "\f": "f",
}


def _hex(number: int, width: int = 0) -> str:
    """``number`` in hex digits of either case, zero-padded to ``width``."""
    digits = f"{number:0{width}x}"
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _character(char: str) -> str:
    """Every way a peer or a library writes ``char``: raw; as an XML or HTML
    entity, named or numeric (decimal or hex, any zeros); as a JSON or Python
    escape (``\\u00fc``, ``\\xfc``, ``\\"``); as the bytes repr of its UTF-8
    (``\\xc3\\xbc``, how h11 quotes a bad header); URL-encoded."""
    code = ord(char)
    utf8 = char.encode("utf-8", "surrogatepass")
    ways = {
        re.escape(char),
        f"{_AMPERSAND}#0*{code};",
        f"{_AMPERSAND}#[xX]0*{_hex(code)};",
        "".join(f"%{_hex(byte, 2)}" for byte in utf8),
        "".join(f"{_BACKSLASHES}x{_hex(byte, 2)}" for byte in utf8),
    }
    name = html.entities.codepoint2name.get(code, "apos" if char == "'" else None)
    if name is not None:
        ways.add(f"{_AMPERSAND}{name};")
    if code < 0x100:
        ways.add(f"{_BACKSLASHES}x{_hex(code, 2)}")
    if code < 0x10000:
        ways.add(f"{_BACKSLASHES}u{_hex(code, 4)}")
    else:
        high, low = divmod(code - 0x10000, 0x400)
        ways.add(f"{_BACKSLASHES}u{_hex(0xD800 + high, 4)}{_BACKSLASHES}u{_hex(0xDC00 + low, 4)}")
        ways.add(f"{_BACKSLASHES}U{_hex(code, 8)}")
    if char in _SHORT_ESCAPES:
        ways.add(_BACKSLASHES + re.escape(_SHORT_ESCAPES[char]))
    if char == " ":
        ways.add(r"\+")
    # Longest first: a raw "&" must not win over the entity it starts.
    return "(?:" + "|".join(sorted(ways, key=len, reverse=True)) + ")"


def _pattern(secret: str) -> str:
    pattern = "".join(_character(char) for char in secret)
    if len(secret) < SHORT:
        pattern = f"(?<!{_WORD_CHAR}){pattern}(?!{_WORD_CHAR})"
    return pattern


class Scrubber:
    """Replaces the given secrets, in every encoding :func:`_character` knows,
    mixed freely, with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        given = {secret for secret in secrets if secret}
        # A non-ASCII secret also as its UTF-8 read as latin-1 ("pÃ¤ss" for
        # "päss"): how an HTTP head (a proxy's reason, a header) is decoded,
        # so a peer echoing it would otherwise show it in that spelling.
        given |= {
            s.encode("utf-8", "surrogatepass").decode("latin-1") for s in given if not s.isascii()
        }
        # Longest first: one secret may contain another.
        ordered = sorted(given, key=len, reverse=True)
        # Compiled when first needed (see _text and _bytes): a secret's
        # pattern takes tens of milliseconds to compile, which every client
        # would pay at its start, and most never need it.
        self._pattern = "|".join(_pattern(secret) for secret in ordered)
        # Every answer's texts pass here: a text with no character that starts
        # an encoding can hold a secret only raw, which `in` finds far sooner.
        self._raw = tuple(ordered)
        self._raw_bytes = tuple(secret.encode("utf-8", "surrogatepass") for secret in ordered)

    def __bool__(self) -> bool:
        return bool(self._raw)

    @functools.cached_property
    def _text(self) -> re.Pattern[str]:
        return re.compile(self._pattern)

    @functools.cached_property
    def _bytes(self) -> re.Pattern[bytes]:
        # Raw non-ASCII characters become their UTF-8 bytes, matched in sequence.
        return re.compile(self._pattern.encode("utf-8", "surrogatepass"))

    def body(self, body: bytes) -> bytes:
        if not self._raw or (
            _ENCODING_BYTES.search(body) is None and not any(s in body for s in self._raw_bytes)
        ):
            return body
        return self._bytes.sub(MASK.encode(), body)

    def text(self, text: str) -> str:
        if not self._raw or (
            _ENCODING.search(text) is None and not any(s in text for s in self._raw)
        ):
            return text
        return self._text.sub(MASK, text)

    def result(self, value: _V) -> _V:
        """A decoded result with every text in it scrubbed (a copy only when
        something was found: results are frozen)."""
        if isinstance(value, str):
            return cast(_V, self.text(value))
        if value is None or isinstance(value, bool | int | float) or not attrs.has(type(value)):
            return value
        record: Any = value
        changes = {}
        for field in attrs.fields(type(record)):
            inner = getattr(record, field.name)
            if inner is None or isinstance(inner, bool | int | float):
                continue  # no text in it: spares a call per field on every answer
            clean = self.result(inner)
            if clean is not inner and clean != inner:
                changes[field.name] = clean
        return cast(_V, attrs.evolve(record, **changes)) if changes else value

    def error(self, exc: VerifClientError) -> VerifClientError:
        """Scrub, in place, every text the error shows; returns it."""
        for name in _ERROR_TEXTS:
            value = getattr(exc, name, None)
            if isinstance(value, str):
                setattr(exc, name, self.text(value))
        exc.args = tuple(self.text(arg) if isinstance(arg, str) else arg for arg in exc.args)
        return exc


_V = TypeVar("_V")


NO_SECRETS: Final = Scrubber(())
