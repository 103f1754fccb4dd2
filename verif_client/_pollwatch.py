"""What a poll run keeps of one id being polled."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._errors import VerifClientError

if TYPE_CHECKING:
    from ._polling import PollKind

logger = logging.getLogger("verif_client")


class Watch:
    """One (id, kind) being polled: the whole per-id state, kept small."""

    __slots__ = ("attempts", "deadline", "kind", "last", "polls", "request_id", "started")

    def __init__(self, request_id: int, kind: PollKind[Any], now: float, timeout: float) -> None:
        self.request_id = request_id
        self.kind = kind
        self.started = now
        self.deadline = now + timeout
        self.polls = 0
        self.attempts = 0
        self.last: object = None


def unforeseen(watch: Watch, exc: Exception) -> VerifClientError:
    # Every id is promised exactly one outcome, even when a transport
    # or a bug raises something we did not foresee.
    logger.exception("unexpected error polling request %s", watch.request_id)
    return VerifClientError(f"unexpected {type(exc).__name__}: {exc}")
