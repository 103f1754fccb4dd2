"""A small HTTP/1.1 server for an ASGI app, on anyio and h11.

Why our own: it runs on asyncio *and* trio, keeps connections alive, honours
``Connection: close`` from the app, and can really drop a connection: when the
app raises :class:`ConnectionDropped` the socket is closed without a byte of
answer, which is what a client must survive. It reads each request body whole
before calling the app (bodies here are small) and is meant for loopback
testing, not for the internet.

Where HTTP.sys answers a request h11 would refuse, so does this server: raw
non-ASCII bytes in the request line are taken (as their %XX escapes, which
decode to the same bytes), and a head over 16 KiB or one that cannot be read
gets HTTP.sys's 400 page before the connection closes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import asynccontextmanager, contextmanager
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote_to_bytes

import anyio
import anyio.abc
import attrs
import h11
import httpx
from anyio.from_thread import start_blocking_portal

from .._service import ENDPOINT_PATH
from . import _responses

ASGIApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]

_log = logging.getLogger("verif_client.simulator")
_MAX_BODY: Final = 8 * 1024 * 1024
_READ_SIZE: Final = 65536
_MAX_HEAD: Final = 16 * 1024  # HTTP.sys's MaxRequestBytes default
_NON_ASCII: Final = re.compile(rb"[\x80-\xff]")


class ConnectionDropped(httpx.RemoteProtocolError):
    """Raised by an app to have the connection closed without any answer.

    Through ``httpx.ASGITransport`` the exception reaches the caller as it is,
    an ``httpx.RemoteProtocolError``: exactly what an httpx user sees when a
    real peer hangs up after reading the request. On :func:`serve`'s sockets
    the server catches it and closes the socket instead.
    """

    def __init__(self) -> None:
        super().__init__("Server disconnected without sending a response.")


@attrs.frozen(slots=True)
class Server:
    """Where :func:`serve` listens. ``base_url`` is what a client is given."""

    host: str
    port: int
    endpoint_path: str = ENDPOINT_PATH

    @property
    def base_url(self) -> str:
        """``http://host:port``: what a client is given as its ``base_url``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def endpoint_url(self) -> str:
        """The ASMX endpoint's full address."""
        return self.base_url + self.endpoint_path

    @property
    def wsdl_url(self) -> str:
        """The endpoint's WSDL (``?WSDL``)."""
        return self.endpoint_url + "?WSDL"


@asynccontextmanager
async def serve(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[Server]:
    """Serve ``app`` on a TCP socket until the block exits (``port=0``: any free port)."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    config = getattr(app, "config", None)
    server = Server(host, bound, getattr(config, "endpoint_path", ENDPOINT_PATH))
    try:
        async with listener, anyio.create_task_group() as group:

            async def handle(stream: anyio.abc.SocketStream) -> None:
                await _Connection(app, stream, server).run()

            group.start_soon(listener.serve, handle, group)
            try:
                yield server
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as error:
        # The task group wraps what the caller's block raised; hand it back as it was.
        if len(error.exceptions) == 1:
            raise error.exceptions[0] from None
        raise


@contextmanager
def serve_in_thread(
    app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, backend: str = "asyncio"
) -> Iterator[Server]:
    """:func:`serve` on an event loop of its own thread, for synchronous callers."""
    with (
        start_blocking_portal(backend) as portal,
        portal.wrap_async_context_manager(serve(app, host, port)) as server,
    ):
        yield server


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


class _Connection:
    """One client connection: a loop of request, app call, response."""

    def __init__(self, app: ASGIApp, stream: anyio.abc.SocketStream, server: Server) -> None:
        self.app = app
        self.stream = stream
        self.server = server
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        self.in_request_line = True

    async def run(self) -> None:
        async with self.stream:
            try:
                while await self._exchange():
                    self.h11.start_next_cycle()
                    self.in_request_line = True
            except h11.RemoteProtocolError as exc:
                await self._refuse(too_long=exc.error_status_hint == 431)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, h11.ProtocolError):
                pass

    async def _refuse(self, *, too_long: bool) -> None:
        """HTTP.sys's answer to a request it cannot read; then the connection closes."""
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        page = _responses.bad_request(too_long)
        headers = [
            (b"content-type", str(page.content_type).encode("ascii")),
            (b"server", b"Microsoft-HTTPAPI/2.0"),
            (b"content-length", str(len(page.body)).encode("ascii")),
            (b"connection", b"close"),
        ]
        try:
            await self._write(h11.Response(status_code=400, headers=headers, reason=b"Bad Request"))
            await self._write(h11.Data(data=page.body))
            await self._write(h11.EndOfMessage())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, h11.ProtocolError):
            pass

    def _receive(self, data: bytes) -> None:
        if self.in_request_line and data:
            # A pipelined request already buffered by h11 is not rewritten: a rare case.
            end = data.find(b"\n")
            line, rest = (data, b"") if end == -1 else (data[:end], data[end:])
            self.in_request_line = end == -1
            data = _NON_ASCII.sub(lambda m: b"%%%02X" % m.group()[0], line) + rest
        self.h11.receive_data(data)

    async def _next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await self.stream.receive(_READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""
            self._receive(data)

    async def _exchange(self) -> bool:
        """Serve one request; True when the connection can carry another."""
        request = await self._next_event()
        if not isinstance(request, h11.Request):
            return False
        # h11 bounds only a head still incomplete; HTTP.sys bounds every head.
        head_size = len(request.target) + sum(
            len(name) + len(value) + 4 for name, value in request.headers
        )
        if head_size > _MAX_HEAD:
            await self._refuse(too_long=True)
            return False
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > _MAX_BODY:
                    return False
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return False
        body = b"".join(chunks)
        head = request.method == b"HEAD"
        state = {"started": False, "sent_body": False}

        async def receive() -> MutableMapping[str, Any]:
            if state["sent_body"]:
                return {"type": "http.disconnect"}
            state["sent_body"] = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
                headers = [(bytes(name), bytes(value)) for name, value in message["headers"]]
                status = message["status"]
                await self._write(
                    h11.Response(status_code=status, headers=headers, reason=_reason(status))
                )
            elif message["type"] == "http.response.body":
                data = message.get("body", b"")
                if data and not head:
                    await self._write(h11.Data(data=data))
                if not message.get("more_body", False):
                    await self._write(h11.EndOfMessage())

        try:
            await self.app(self._scope(request), receive, send)
        except ConnectionDropped:
            return False
        except Exception:
            _log.exception("the simulated service failed on %s", request.target)
            if not state["started"]:
                await self._write(
                    h11.Response(
                        status_code=500,
                        headers=[(b"content-length", b"0"), (b"connection", b"close")],
                    )
                )
                await self._write(h11.EndOfMessage())
            return False
        return self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE

    async def _write(self, event: Any) -> None:
        data = self.h11.send(event)
        if data:
            await self.stream.send(data)

    def _scope(self, request: h11.Request) -> MutableMapping[str, Any]:
        raw_path, _, query = bytes(request.target).partition(b"?")
        client = self.stream.extra(anyio.abc.SocketAttribute.remote_address)
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method.decode("ascii"),
            "scheme": "http",
            "path": unquote_to_bytes(raw_path).decode("utf-8", "replace"),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": [(bytes(name), bytes(value)) for name, value in request.headers],
            "client": client if isinstance(client, tuple) else None,
            "server": (self.server.host, self.server.port),
        }
