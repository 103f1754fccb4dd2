"""Reading one answer off a pool connection: llhttp (httptools) when installed, else h11.

Both parsers give the pool the same thing for the same bytes: the final
answer's status and headers (1xx answers skipped), its body in pieces as they
arrive (so the body cap applies while streaming), whether it is complete, and
whether the connection may carry another request. What either refuses is an
``h11.RemoteProtocolError``, so the pool reports both alike.

``httptools`` (the ``speedups`` extra) parses in C: about a third of a
polling request's CPU with h11. The defences are the pool's, not the
parser's, and are the same on both:

- a head (status line and headers) still incomplete after ``MAX_HEAD``
  bytes is refused while it streams in (one that arrives whole in one read
  is not: h11's rule);
- a body framed by Content-Length or chunks must be whole; one framed by the
  close (HTTP/1.0, or neither header) ends at the close, and the connection
  is never reused;
- bytes after the answer, a ``Connection: close`` or HTTP/1.0 answer, or one
  not yet whole retire the connection;
- a 101 (no upgrade was asked for) is refused; other 1xx are skipped.

The pool sends GET and POST only; a HEAD (an answer without its body) is
read by h11.
"""

from __future__ import annotations

from typing import Final, Protocol

import h11

# h11's own default for an incomplete event (a head), applied to both parsers.
MAX_HEAD: Final = 16 * 1024
_END: Final = h11.EndOfMessage()
_STAND_INS: dict[str, h11.Request] = {}


def _stand_in(method: str) -> h11.Request:
    event = _STAND_INS.get(method)
    if event is None:
        event = _STAND_INS[method] = h11.Request(
            method=method, target="/", headers=[("Host", "stand-in")]
        )
    return event


class H11Answer:
    """The answer to each request of one connection, read by h11 (pure Python)."""

    __slots__ = ("_h", "chunks", "complete", "headers", "status")

    def __init__(self) -> None:
        self._h = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] | None = None
        self.chunks: list[bytes] = []
        self.complete = False

    def start(self, method: str) -> None:
        """A request with this method is about to be written: read its answer next."""
        # h11 reads the answer; what it must know of the request is only the
        # method (a HEAD answer has no body) and that the connection may stay
        # open, so it is told with a stand-in of the same method.
        h = self._h
        h.send(_stand_in(method))
        h.send(_END)
        self.status = 0
        self.headers = None
        self.complete = False

    def feed(self, data: bytes) -> None:
        """Bytes off the connection (b"": the peer closed); raises on broken framing."""
        h = self._h
        h.receive_data(data)
        chunks = self.chunks
        while True:
            event = h.next_event()
            kind = type(event)
            if event is h11.NEED_DATA:
                return
            if kind is h11.Data:
                chunks.append(bytes(event.data))  # type: ignore[union-attr]
            elif kind is h11.Response:
                self.status = event.status_code  # type: ignore[union-attr]
                self.headers = list(event.headers)  # type: ignore[union-attr]
            elif kind is h11.EndOfMessage:
                self.complete = True
                return
            elif kind is h11.InformationalResponse:
                pass  # 100 Continue and friends: the attempt's deadline bounds how many
            else:  # ConnectionClosed before the answer ended
                raise h11.RemoteProtocolError("Server disconnected without sending a response.")

    def memorable(self) -> bool:
        return False  # h11 must see every answer: its state follows each

    def replay(self) -> bool:
        return False

    def reusable(self) -> bool:
        h = self._h
        # MUST_CLOSE (Connection: close, HTTP/1.0) leaves the states short of DONE.
        if h.our_state is not h11.DONE or h.their_state is not h11.DONE:
            return False
        data, closed = h.trailing_data
        if data or closed:
            # Bytes after the answer were never asked for: they must never be
            # read as the answer to the next request.
            return False
        h.start_next_cycle()
        return True


class _After(Exception):
    """Bytes began another message after the answer: parsing stops there."""


class LlhttpAnswer:
    """The same as :class:`H11Answer`, parsed by llhttp through httptools."""

    __slots__ = (
        "_after",
        "_by_close",
        "_fed",
        "_informational",
        "_keep",
        "_parser",
        "_pending",
        "chunks",
        "complete",
        "headers",
        "status",
    )

    def __init__(self) -> None:
        import httptools

        self._parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] | None = None
        self.chunks: list[bytes] = []
        self.complete = False
        self._pending: list[tuple[bytes, bytes]] = []
        self._fed = 0  # bytes fed while the head was incomplete
        self._informational = False
        self._by_close = False  # a body that ends where the connection does
        self._after = False  # bytes came after the answer
        self._keep = False  # the answer lets the connection carry another request

    def start(self, method: str) -> None:
        if method == "HEAD":  # pragma: no cover - the pool never sends one
            raise h11.LocalProtocolError("HEAD is read by h11 only")
        self.status = 0
        self.headers = None
        self.complete = False
        self._fed = 0

    def feed(self, data: bytes) -> None:
        if not data:
            # The peer closed: only a body framed by the close ends well here.
            if not self.complete:
                if not self._by_close:
                    raise h11.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                self.complete = True
            return
        if self.headers is None:
            self._fed += len(data)
        try:
            self._parser.feed_data(data)
        except Exception as exc:
            if self._after:
                return  # the answer is whole; what follows only retires the connection
            # `raise ... from None`, spelled out: mypyc drops a raise's `from`.
            refused = h11.RemoteProtocolError(_reason(exc))
            refused.__cause__ = None
            raise refused  # noqa: B904 (its `from None` is the line above)
        if self.headers is None and self._fed > MAX_HEAD:
            raise h11.RemoteProtocolError(_HEAD_TOO_LONG)

    def reusable(self) -> bool:
        return self.complete and self._keep and not self._after

    def memorable(self) -> bool:
        return self.complete and self._keep and not self._after and self._fed > 0

    def replay(self) -> bool:
        # llhttp is back at a message's start after a reusable answer, as it
        # was before the one replayed: parsing the same bytes would end here.
        self.complete = True
        self._keep = True
        self._after = False
        return True

    # -- httptools' callbacks ----------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            self._after = True
            raise _After
        self._pending = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._pending.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            if status == 101:
                raise h11.RemoteProtocolError("101 Switching Protocols was never asked for")
            # 100 Continue and friends: skipped, as h11 does; the attempt's
            # deadline bounds how many.
            self._informational = True
            return
        headers = self._pending
        framed = status in (204, 304)
        for name, value in headers:
            if name == b"content-length" or (
                name == b"transfer-encoding" and value.lower().endswith(b"chunked")
            ):
                framed = True
        self._by_close = not framed
        parser = self._parser
        # Read here: llhttp forgets it once the message is complete. h11 keeps
        # no HTTP/1.0 connection alive, keep-alive header or not.
        self._keep = framed and parser.get_http_version() == "1.1" and parser.should_keep_alive()
        self.status = status
        self.headers = headers

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            self._fed = 0  # each head is capped, not their sum (h11 does the same)
            return
        self.complete = True


_HEAD_TOO_LONG: Final = f"answer head too long (over {MAX_HEAD} bytes)"


def _reason(exc: BaseException) -> str:
    cause = exc.__context__
    if isinstance(cause, h11.ProtocolError):
        return str(cause)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Reader(Protocol):
    """What the pool reads an answer with (see the module's docstring)."""

    status: int
    headers: list[tuple[bytes, bytes]] | None
    chunks: list[bytes]
    complete: bool

    def start(self, method: str) -> None: ...
    def feed(self, data: bytes) -> None: ...
    def reusable(self) -> bool: ...

    def memorable(self) -> bool:
        """The answer just read came whole in one read, left the connection
        reusable, and can be replayed (see replay)."""

    def replay(self) -> bool:
        """Take the next answer as whole without parsing: its bytes are
        those of a memorable answer, read from the state that answer left
        (a reusable connection's). False (nothing done) if this reader cannot."""


# Looked up at the first connection, not at import: start-up stays as it was.
# The tests set it to run the same bad peers against both.
READER: type[Reader] | None = None


def reader() -> type[Reader]:
    global READER
    if READER is None:
        try:
            import httptools  # noqa: F401
        except ImportError:
            READER = H11Answer
        else:
            READER = LlhttpAnswer
    return READER
