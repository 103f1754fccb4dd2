"""The connection layer behind the client: one narrow interface, two implementations.

``ConnectionPool`` (our own HTTP/1.1 pool on h11 and anyio streams) is the
default; ``HttpxSender`` adapts what a user brings (``http_client=`` or
``transport=``). Both send one codec request description and hand back the
status, the headers and a body read under the size cap, or raise
``SendError``, which says whether the request can have left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias

from .._codec import HTTPRequest

__all__ = ["Answer", "FirstAttempt", "SendError", "Sender", "StaleConnection", "Transport"]

# (status, headers, body): what a codec's decode() takes.
Answer: TypeAlias = tuple[int, Sequence[tuple[str, str]], bytes]


class FirstAttempt:
    """A call's first attempt, made at once (``ConnectionPool.send_at_once``)
    and not ending in a result: its answer, or what ``send`` would have
    raised, for the call's retry loop to take as its first attempt's."""

    __slots__ = ("began", "outcome")

    def __init__(self, began: float, outcome: Answer | Exception) -> None:
        self.began = began
        self.outcome: Answer | Exception | None = outcome

    def answer(self) -> Answer:
        """The answer, or the attempt's error raised (taken once)."""
        outcome = self.outcome
        if outcome is None:
            raise RuntimeError("a first attempt's outcome is taken once")
        # Held here no more: the error's traceback holds the frames it goes
        # through, and any that holds this attempt (or the error) would make
        # a cycle that outlives the call until the collector finds it. An
        # answer may quote our request (an echoing server): the frames an
        # error keeps must not hold it through this attempt.
        self.outcome = None
        if not isinstance(outcome, Exception):
            return outcome
        try:
            raise outcome
        finally:
            del outcome


class SendError(Exception):
    """One attempt failed at the network level; mapped by the client to
    ``TransportError`` (or ``DeliveryUnknownError`` when a non-idempotent
    request may have left). A :class:`Transport` of your own raises it.

    ``never_sent`` is True only when no byte of the request can have reached
    the peer: the connection could not be opened. The message has the
    ``Kind: detail`` shape of the client's TransportError texts and never
    carries request bytes (they hold the password).
    """

    def __init__(self, message: str, *, never_sent: bool) -> None:
        super().__init__(message)
        self.never_sent = never_sent


class StaleConnection(SendError):
    """A poll's attempt at once ended before any byte of an answer came (the
    peer's close or reset, or a write the kernel refused) on a connection
    taken without the idle check's ``poll(0)``: what that check exists to
    find. The poll was not made: its caller starts it again, as it would
    have had the check turned the connection away (see
    ConnectionPool.send_at_once)."""


class Transport(Protocol):
    """What ``VerificationClient(transport=...)`` accepts besides an httpx transport.

    ``send`` gets one codec request description (method, path relative to the
    client's base URL, headers, body) and returns ``(status, headers, body)``,
    the body decoded (no Content-Encoding left) and at most
    ``max_response_bytes`` long, else ``ResponseTooLargeError``. It must end
    within ``time_limit`` seconds, and report a network failure as
    :class:`SendError`, ``never_sent=True`` only when no byte can have left.
    ``aclose`` is called when the client closes. No httpx objects are built on
    this path: see ``Simulator.transport()``.
    """

    async def send(
        self, request: HTTPRequest, *, time_limit: float, max_response_bytes: int, operation: str
    ) -> Answer:
        """Send one request and return ``(status, headers, body)``.

        Args:
            request: The request as the codec built it; its path is relative to
                the client's ``base_url``.
            time_limit: Seconds the whole exchange may take.
            max_response_bytes: Refuse a larger body with ``ResponseTooLargeError``.
            operation: The operation's wire name (for errors and logs).

        Raises:
            SendError: The network failed; ``never_sent=True`` only when no byte
                can have left (the client may then retry any operation).
            ResponseTooLargeError: The body is over ``max_response_bytes``.
        """
        ...

    async def aclose(self) -> None:
        """Release what the transport holds; the client calls it as it closes."""
        ...


# The client's own name for it: every connection layer is one.
Sender = Transport
