"""The simulator as a ``verif_client.Transport``: requests handed over in memory.

Through ``httpx.ASGITransport`` every call builds an ``httpx.Request``, an
ASGI scope and message exchange, and an ``httpx.Response``: about twice the
codec's own cost (docs/performance.md: in process). Here the client's request
description becomes the simulator's ``Request`` directly and its answer comes
back as ``(status, headers, body)``, with what the wire would show (a Host
and Content-Length header, the attempt deadline, the size cap and a dropped
connection as a failure after sending) kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import anyio

from .._codec import HTTPRequest
from .._errors import ResponseTooLargeError
from .._inflate import ACCEPT_ENCODING
from .._transport import Answer, SendError
from ._asmx import MAX_REQUEST_BYTES, Request, header_map
from ._server import ConnectionDropped

if TYPE_CHECKING:
    from ._simulator import Simulator

_HOST = "simulator"


class SimulatorTransport:
    """Sends each request to one :class:`Simulator` in this process.

    Get one with ``simulator.transport()`` and pass it as
    ``VerificationClient(..., transport=...)``. ``base_url`` gives the Host
    header and scheme the simulator sees (a socket would carry the client's).
    """

    def __init__(self, simulator: Simulator, base_url: str = "http://simulator") -> None:
        self.simulator = simulator
        site = urlsplit(base_url)
        self._host = site.netloc or _HOST
        self._server_host = site.hostname or _HOST
        self._scheme = site.scheme or "http"

    def __repr__(self) -> str:
        return f"<SimulatorTransport {self.simulator!r}>"

    async def send(
        self,
        request: HTTPRequest,
        *,
        time_limit: float,
        max_response_bytes: int,
        operation: str,
    ) -> Answer:
        """Hand the request to the simulator and return its answer, as
        ``verif_client.Transport.send`` does: a simulated ``latency`` past
        ``time_limit`` fails the attempt, a body over ``max_response_bytes`` is
        refused, and a dropped connection is a ``SendError`` after sending.
        """
        path, _, query = request.path.partition("?")
        headers, repeated = header_map(request.headers)
        headers.setdefault("accept-encoding", ACCEPT_ENCODING)
        if request.body:
            headers["content-length"] = str(len(request.body))
        headers.setdefault("host", self._host)
        received = Request(
            method=request.method.upper(),
            path=unquote(path),
            query=query.encode("latin-1"),
            headers=headers,
            body=request.body,
            host=headers["host"],
            scheme=self._scheme,
            repeated=repeated,
            server_host=self._server_host,
            too_large=len(request.body) > MAX_REQUEST_BYTES,
        )
        response = None
        try:
            with anyio.move_on_after(time_limit):
                response = await self.simulator.handle(received)
        except ConnectionDropped as exc:
            raise SendError(f"RemoteProtocolError: {exc}", never_sent=False) from None
        if response is None:
            raise SendError(
                f"Timeout: no complete answer within {time_limit:g} s (one deadline per attempt)",
                never_sent=False,
            )
        if len(response.body) > max_response_bytes:
            raise ResponseTooLargeError(max_response_bytes, operation=operation)
        body = response.body
        return response.status, [*response.headers, ("Content-Length", str(len(body)))], body

    async def aclose(self) -> None:
        """Nothing to release: the simulator outlives its transports."""
