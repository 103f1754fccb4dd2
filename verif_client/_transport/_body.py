"""A response body collected under the size cap, inflated a bounded piece at a time."""

from __future__ import annotations

from .._errors import ResponseTooLargeError
from .._inflate import Inflater


def check_declared_length(declared: str | None, cap: int, operation: str) -> None:
    """Refuse before reading when the peer announces more than the cap."""
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise ResponseTooLargeError(cap, operation=operation)


def whole_body(chunks: list[bytes], cap: int, operation: str) -> bytes:
    """A body that came whole, as it was sent (no Content-Encoding), under
    the cap: what a CappedBody fed ``chunks`` returns, without one. Takes the
    chunks (the list is left empty)."""
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    chunks.clear()
    if len(body) > cap:
        raise ResponseTooLargeError(cap, operation=operation)
    return body


class CappedBody:
    """Raw bytes in, at most ``cap`` bytes of decoded body out, else ResponseTooLargeError."""

    __slots__ = ("_cap", "_chunks", "_inflate", "_operation", "_size")

    def __init__(self, content_encoding: str, cap: int, operation: str) -> None:
        # None for a body sent as it is (no Content-Encoding): most answers.
        self._inflate = Inflater(content_encoding, operation) if content_encoding else None
        self._cap = cap
        self._operation = operation
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, raw: bytes) -> None:
        inflate = self._inflate
        if inflate is None:
            self._size += len(raw)
            if self._size > self._cap:
                raise ResponseTooLargeError(self._cap, operation=self._operation)
            self._chunks.append(raw)
            return
        for chunk in inflate(raw, self._cap - self._size + 1):
            self._size += len(chunk)
            if self._size > self._cap:
                raise ResponseTooLargeError(self._cap, operation=self._operation)
            self._chunks.append(chunk)

    def value(self) -> bytes:
        return b"".join(self._chunks)
