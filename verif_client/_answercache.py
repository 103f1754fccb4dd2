"""Decoded answers kept by their bytes, for the answers that repeat.

A poll's answer names no id: thousands of HasBeenVerified polls get one of a
handful of bodies (true, false, nil, an error message), and so do the pending
answers of MobileLocation_GetResult. Parsing such a body again yields an
equal result, and results are frozen, so the first decoding serves them all.
Only successful decodings of small bodies are kept, and a body is kept only
once it has been seen twice: a send's answer, which carries a fresh request
id every time, never pushes the repeating ones out. Both tables are bounded,
so a peer that makes every answer different costs a miss, never memory.
"""

from __future__ import annotations

from typing import Final

# The service's poll answers are a few hundred bytes (SOAP) or less (bare XML).
MAX_BODY: Final = 2048
_KEPT: Final = 64
_SEEN: Final = 256

MISSING: Final = object()

Key = tuple[object, str, bytes]
"""What decides a result: the codec, the operation's name and the body
(status 200; a codec reads no header)."""


class AnswerCache:
    """Decoded results by (codec, operation, body), bounded, first in first out."""

    __slots__ = ("_kept", "_seen", "kept")

    def __init__(self) -> None:
        self._kept: dict[Key, object] = {}
        self._seen: dict[Key, None] = {}
        # get()'s look-up as the dict's own method: ``kept(key, MISSING)``,
        # with no Python frame, for the callers on a poll's path.
        self.kept = self._kept.get

    def get(self, key: Key) -> object:
        """The result kept for ``key``, or ``MISSING`` (a result may be None or falsy)."""
        return self._kept.get(key, MISSING)

    def put(self, key: Key, result: object) -> None:
        """Record a successful decoding; kept once the same body has come twice."""
        seen = self._seen
        if key not in seen:
            if len(seen) >= _SEEN:
                del seen[next(iter(seen))]
            seen[key] = None
            return
        kept = self._kept
        if len(kept) >= _KEPT:
            del kept[next(iter(kept))]
        kept[key] = result

    def __len__(self) -> int:
        return len(self._kept)
