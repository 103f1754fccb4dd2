"""Taking our secrets out of whatever the service sends back.

A server that echoes the request (into a fault text, a 500 page, a garbled
answer) would hand our password back to us, and from there into an error
message, a log record, the CLI's output, the bulk output file and the journal.
Everything the service sends passes through here first: the body bytes before
any text is cut from them (a cut could keep half a password), then the texts
of the error raised, which may also hold text from the network layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, TypeVar, cast

import attrs

from . import _xml
from ._errors import VerifClientError

MASK: Final = "***"
_ERROR_TEXTS: Final = ("message", "reason", "detail", "server_message", "element")


def _forms(secret: str) -> set[str]:
    """How a secret can come back: as sent (escaped once, as our SOAP header
    carries it), echoed inside XML text (escaped twice), decoded, or quoted
    by a ``repr()`` in an error message."""
    once = _xml.escape(secret)
    return {secret, once, _xml.escape(once), repr(secret)[1:-1]}


class Scrubber:
    """Replaces every known form of the given secrets with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first: one secret's form may contain another's.
        texts = sorted({form for secret in secrets if secret for form in _forms(secret)}, key=len)
        self._texts = tuple(reversed(texts))
        self._bytes = tuple(form.encode("utf-8") for form in self._texts)

    def __bool__(self) -> bool:
        return bool(self._texts)

    def body(self, body: bytes) -> bytes:
        for form in self._bytes:
            if form in body:
                body = body.replace(form, MASK.encode())
        return body

    def text(self, text: str) -> str:
        for form in self._texts:
            if form in text:
                text = text.replace(form, MASK)
        return text

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
