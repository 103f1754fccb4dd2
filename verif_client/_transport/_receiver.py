"""Reading answers on asyncio without anyio's per-receive bookkeeping.

anyio's asyncio socket stream keeps reading paused between receives and, on
every receive that has to wait, resumes reading and pauses it again: two
``epoll_ctl`` calls, the selector's Python bookkeeping and a guard object per
answer, about a tenth of a polling request's CPU. A pool connection only ever
waits for the answer to the request it just wrote, so on asyncio the pool
puts this protocol in place of anyio's on the stream's transport: reading
stays on, and bytes go straight to the one waiting attempt. Over TLS,
asyncio's own TLS layer goes between the socket and this protocol (anyio's
TLS stream would read through the same paused and resumed socket stream).

Reading always on must not let a peer fill our memory: bytes that arrive when
no answer is awaited were never asked for, so they end the connection there
and then (and the pool's idle check sees it, as it sees the peer's close).
While an answer is awaited, every wake-up takes all that arrived, and the
transport reads at most one chunk per event-loop pass, so at most a chunk or
two is ever held here; the body's size cap applies as it is fed to h11.

The pool opens its direct connections with this protocol from the start
(the loop's own ``create_connection``: no anyio stream, no stream objects
per connection); through a proxy, anyio connects, the tunnel is opened
through its stream, and this protocol takes over. On trio, or with a stream
this does not recognise, the pool reads through the anyio stream as before.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import anyio

_TRANSPORT_METHODS = (
    "abort",
    "get_protocol",
    "get_write_buffer_size",
    "is_closing",
    "resume_reading",
    "set_protocol",
    "write",
)


class Listener(Protocol):
    def on_event(self) -> None:
        """Bytes, the end or a cut came: take() them."""

    def on_data(self, data: bytes) -> None:
        """Bytes came, with nothing before them to take(): these are them."""


class AttemptCut(Exception):
    """The attempt waiting on this connection reached its deadline (see cancel)."""


class AsyncioReceiver(asyncio.Protocol):
    """The protocol of one pool connection's transport, once taken over."""

    @classmethod
    def take_over(cls, stream: object) -> AsyncioReceiver | None:
        """Install a receiver on an anyio asyncio socket stream; None if it is not one."""
        transport: Any = getattr(stream, "_transport", None)
        previous: Any = getattr(stream, "_protocol", None)
        # Duck-typed: uvloop's transports have asyncio's methods without its base class.
        if (
            previous is None
            or not all(hasattr(transport, name) for name in _TRANSPORT_METHODS)
            or transport.get_protocol() is not previous
            or not hasattr(previous, "read_queue")
        ):
            return None
        receiver = cls(transport)
        # A peer that spoke before we did (or closed) left its mark on anyio's
        # protocol: this connection must never carry a request.
        receiver.stray = bool(
            previous.read_queue
            or getattr(previous, "is_at_eof", False)
            or getattr(previous, "exception", None) is not None
            or transport.is_closing()
        )
        transport.set_protocol(receiver)
        transport.resume_reading()
        return receiver

    def __init__(self, transport: asyncio.Transport | None = None) -> None:
        """With ``transport``, for take_over; without, as the protocol factory
        of the loop's create_connection (connection_made gives it)."""
        self._transport: Any = None
        if transport is not None:
            self._use(transport)
        self._loop = asyncio.get_running_loop()
        self._chunks: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._lost = False
        self._error: BaseException | None = None
        # Something arrived, or the connection ended, since the last answer:
        # an attribute, not a property over the three flags, since the pool
        # reads it before every request (set wherever one of them is).
        self.stray = False
        self.expecting = False
        # Set by the pool before it closes the connection: a close of ours, not the peer's.
        self.closed_here = False
        self._cut = False
        # An attempt driven by this receiver's events rather than awaiting
        # them (see _pool's _AttemptAtOnce): called for each, in their place.
        self.listener: Listener | None = None

    async def start_tls(self, context: ssl.SSLContext, server_hostname: str) -> None:
        """Speak TLS from here on: asyncio's TLS layer goes between the socket and us."""
        tls = await self._loop.start_tls(
            self._transport, self, context, server_hostname=server_hostname
        )
        if tls is None:  # the transport closed during the handshake
            raise anyio.BrokenResourceError
        # Writes, closes and the unsent count go through the TLS layer now.
        self._use(tls)
        # uvloop hands over what came in with the handshake's last flight one
        # loop pass after the handshake returns: take it in here, so that a
        # server that spoke (or closed) before it was asked anything is seen.
        await asyncio.sleep(0)
        if self._error is not None:
            raise _broken(self._error)  # a TLS alert: its words
        if self.stray:
            raise anyio.BrokenResourceError(
                "the server sent bytes (or closed) before it was asked anything"
            )

    def write(self, data: bytes) -> None:
        self._transport.write(data)

    def _use(self, transport: Any) -> None:
        self._transport = transport
        # ``unsent_bytes() > 0``: part of the request still waits in the
        # transport's buffer. The transport's own method, with no Python
        # frame of ours: the pool asks after every answer.
        self.unsent_bytes: Callable[[], int] = transport.get_write_buffer_size

    def abort(self) -> None:
        """Close the connection at once, as ours (see closed_here)."""
        self.closed_here = True
        self._transport.abort()

    # -- asyncio.Protocol ------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._use(transport)

    def data_received(self, data: bytes) -> None:
        if not self.expecting:
            self.stray = True
            self._transport.abort()
            return
        listener = self.listener
        if listener is not None and not self._chunks and not self._cut:
            # What take() would return: the bytes, with no queue in between
            # (a listener takes every event as it comes, so nothing waits).
            listener.on_data(data)
            return
        self._chunks.append(data)
        if listener is not None:
            listener.on_event()  # _wake's, without a call of its own per answer
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        self._eof = True
        self.stray = True
        self._wake()
        return False  # the transport closes: a half-closed connection is of no use here

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.stray = True
        self._error = exc
        self._wake()

    def cancel(self) -> None:
        """The attempt's deadline passed: its receive raises AttemptCut, now or
        at its next call. The attempt then closes the connection, so this is
        never undone. (Named as a cancel scope's, whose place it takes in the
        pool's shared deadlines.)"""
        self._cut = True
        self._wake()

    def _wake(self) -> None:
        listener = self.listener
        if listener is not None:
            listener.on_event()
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- what the pool calls -----------------------------------------------

    def take(self) -> bytes | None:
        """All bytes that arrived, or None if the caller must await
        ``arrival()`` first; raises as a stream's receive() does at the end.

        Two plain calls rather than one coroutine: the pool's exchange awaits
        the future itself, one coroutine fewer held per answer awaited."""
        self._waiter = None
        chunks = self._chunks
        if self._cut:
            raise AttemptCut
        if not chunks:
            if self._error is not None:
                raise _broken(self._error)
            if self.closed_here:
                raise anyio.ClosedResourceError
            if self._eof or self._lost:
                # A TLS layer may report the peer's close as a lost connection
                # without an end of file first (uvloop's does).
                raise anyio.EndOfStream
            return None
        if len(chunks) == 1:
            return chunks.popleft()
        data = b"".join(chunks)
        chunks.clear()
        return data

    def arrival(self) -> asyncio.Future[None]:
        """A future done when bytes, the end or a cut come (see take)."""
        waiter = self._waiter = self._loop.create_future()
        return waiter


def _broken(cause: BaseException) -> anyio.BrokenResourceError:
    """``raise anyio.BrokenResourceError from cause``'s exception: mypyc (hatch_build.py)
    drops a raise's ``from``, and the pool's words for a failure come from the cause."""
    error = anyio.BrokenResourceError()
    error.__cause__ = cause
    return error
