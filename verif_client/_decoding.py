"""An answer decoded, and our secrets taken out of what it tells us.

The body itself is decoded as it came: masking inside the XML could break its
structure or change its data. Only a failure is decoded again from a masked
body, because its texts quote the body cut to a length, and a cut could keep
half of a secret. A repeated answer (the same body to the same operation,
as a poll's "not yet" is) is decoded once (see _answercache).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ._answercache import MAX_BODY, MISSING, AnswerCache, Key
from ._codec import Codec
from ._errors import VerifClientError
from ._operations import Operation
from ._scrub import Scrubber

R = TypeVar("R")


class Decoder:
    """Decodes one client's answers: cached, and scrubbed of its secrets."""

    __slots__ = ("_answers", "_scrub", "kept")

    def __init__(self, scrub: Scrubber) -> None:
        self._scrub = scrub
        self._answers = AnswerCache()
        # ``kept(key, MISSING)``: the result decode() returns for ``key``
        # without decoding, for a caller that looks first (see _atonce).
        self.kept = self._answers.kept

    def decode(
        self,
        codec: Codec,
        op: Operation[R],
        status: int,
        headers: Sequence[tuple[str, str]],
        body: bytes,
    ) -> R:
        """Decode an answer; our secrets are taken out of what it tells us (see _scrub)."""
        key: Key | None = None
        if status == 200 and len(body) <= MAX_BODY:
            key = (codec, op.name, body)
            kept = self._answers.get(key)
            if kept is not MISSING:
                return kept  # type: ignore[return-value]
        scrub = self._scrub
        try:
            result = codec.decode(op, status, headers, body)
        except VerifClientError as exc:
            if not scrub:
                raise
            # Decoded again from a masked body, here and not in a method of
            # its own: the failure's traceback keeps the frame that decoded
            # it, and that frame's callers (f_back), with their locals as
            # they left them. This one's are cleared below; a method's would
            # keep the unmasked failure and body (and the failure: a cycle).
            failure = _redecoded(codec, op, status, headers, scrub.body(body))
            if failure is None:
                # The masked body decodes: the failure is the unmasked body's
                # own, and the frames of its traceback hold that body.
                failure = exc.with_traceback(None)
            scrub.error(failure)
        else:
            if scrub:
                result = scrub.result(result)
            if key is not None:
                self._answers.put(key, result)
            return result
        # The failure's traceback keeps this frame: the answer, which may
        # quote our request, is not left in its locals.
        del body, headers, key
        # Raised out of the except block, so that the unmasked failure is not
        # its __context__; and not kept, since its traceback holds this frame:
        # the two would make a cycle that keeps the whole call alive until the
        # collector's oldest generation finds it.
        try:
            raise failure from None
        finally:
            del failure


def _redecoded(
    codec: Codec,
    op: Operation[Any],
    status: int,
    headers: Sequence[tuple[str, str]],
    masked: bytes,
) -> VerifClientError | None:
    """The failure of a masked body, or None if it decodes. The failure's
    traceback keeps this frame, which holds only the masked body."""
    try:
        codec.decode(op, status, headers, masked)
    except VerifClientError as exc:
        # Raised while the unmasked failure was being handled, it would keep
        # that as its context (``from None`` only hides it from a printout).
        exc.__context__ = None
        return exc
    return None
