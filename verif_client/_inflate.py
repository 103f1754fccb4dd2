"""Content decoding with a bound on what each step may produce.

httpx's own decoder inflates a whole network chunk at once: 64 KiB of gzip can
become 64 MiB before any size cap could look at it. This one inflates at most
what is left under the cap, so a compression bomb is refused early.
"""

from __future__ import annotations

import zlib
from typing import Any, Final

from ._errors import DecodeError

ACCEPT_ENCODING: Final = "gzip, deflate"


class Inflater:
    """Content decoding with a bound on every piece it returns (identity, gzip, deflate)."""

    def __init__(self, content_encoding: str, operation: str) -> None:
        encoding = content_encoding.strip().lower()
        self._operation = operation
        self._zlib: Any = None
        if encoding == "gzip" or encoding == "x-gzip":
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
        elif encoding not in ("", "identity"):
            raise DecodeError(
                f"unsupported Content-Encoding {content_encoding!r}", operation=operation
            )
        self._deflate_retry = encoding == "deflate"

    def __call__(self, data: bytes, limit: int) -> list[bytes]:
        """Inflate ``data``; stops early once more than ``limit`` bytes came out."""
        if self._zlib is None:
            return [data]
        pieces: list[bytes] = []
        produced = 0
        try:
            while data and produced < limit and not self._zlib.eof:
                try:
                    piece = self._zlib.decompress(data, max(1, limit - produced))
                except zlib.error:
                    if not self._deflate_retry:
                        raise
                    # Some servers send raw deflate without the zlib header.
                    self._deflate_retry = False
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                self._deflate_retry = False
                pieces.append(piece)
                produced += len(piece)
                data = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise DecodeError(
                f"corrupt compressed body: {exc}", operation=self._operation
            ) from None
        return pieces
