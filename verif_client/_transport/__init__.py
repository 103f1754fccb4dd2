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

__all__ = ["Answer", "SendError", "Sender"]

# (status, headers, body): what a codec's decode() takes.
Answer: TypeAlias = tuple[int, Sequence[tuple[str, str]], bytes]


class SendError(Exception):
    """One attempt failed at the network level; internal, mapped by the client.

    ``never_sent`` is True only when no byte of the request can have reached
    the peer: the connection could not be opened. The message has the
    ``Kind: detail`` shape of the client's TransportError texts and never
    carries request bytes (they hold the password).
    """

    def __init__(self, message: str, *, never_sent: bool) -> None:
        super().__init__(message)
        self.never_sent = never_sent


class Sender(Protocol):
    """Sends one request description; ``time_limit`` seconds bound the whole attempt."""

    async def send(
        self, request: HTTPRequest, *, time_limit: float, max_response_bytes: int, operation: str
    ) -> Answer: ...

    async def aclose(self) -> None: ...
