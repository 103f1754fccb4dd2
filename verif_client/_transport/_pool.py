"""The default connection layer: an HTTP/1.1 pool.

Answers are parsed by llhttp when httptools (the ``speedups`` extra) is
installed, by h11 otherwise, with the same defences either way (see _parse).

On asyncio a direct connection is the loop's own, with a protocol of ours
reading the answers (see _receiver); through a proxy anyio connects and that
protocol takes over its stream's transport. On trio, anyio's streams.

Why our own: httpx 0.28's pool rescans, and polls the socket of, every pooled
connection on every request, so its cost grows with its size; here checkout
and return are O(1) (a stack of idle connections; the client's capacity
limiter bounds how many are busy) and only the connection being checked out
is looked at.

What a bad peer cannot do to it:
- hold an attempt past ``timeout``: one deadline covers connect, write and the
  whole answer, not each read (a trickle or endless 100-Continues end there);
- have an unrequested answer read as the next call's: a connection with bytes
  left after an answer, or on which bytes (or a close) arrived while it was
  idle, is closed, never used;
- redirect a request: a 3xx is a status like any other for the codec.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.lowlevel
import h11

from .._clock import loop_backend, loop_clock, running_loop
from .._codec import HTTPRequest
from .._errors import VerifClientError
from . import Answer, SendError, StaleConnection, _parse
from ._body import CappedBody, check_declared_length, whole_body
from ._connection import READ_SIZE
from ._connection import Connection as _Connection
from ._deadlines import Deadlines, deadlines_for
from ._headers import Headers
from ._heads import RequestHeads
from ._opening import Opener, reason_of
from ._proxy import Proxy
from ._receiver import AsyncioReceiver, AttemptCut
from ._spliced import IdRequests
from ._tls import ClientCert, certificate_refused

# An idle connection older than this is closed rather than reused: servers
# drop idle keep-alive connections after a few seconds (IIS: 120 s, many
# proxies 5-60 s), and a request written into a connection the server is
# closing may or may not have arrived.
KEEPALIVE_EXPIRY: Final = 5.0
# Connections being opened at once. Opening one costs a few hundred µs of
# Python; a thousand calls that all open one at the start make an event-loop
# pass of a third of a second, and every answer (the first poll's included)
# waits behind it. In turns of this many, the first requests leave at once,
# and a pool of thousands still fills in a few round trips.
_OPENING_AT_ONCE: Final = 32


_DISCONNECTED: Final = "RemoteProtocolError: Server disconnected without sending a response."

# Called with the answer, what ``send`` would raise, or None when cut at the caller's own time.
AnswerCallback = Callable[[Any, "Answer | Exception | None"], None]


class _Attempt:
    """How far one attempt got (whether any byte of the request may have
    left), and its answer being read (see feed)."""

    __slots__ = (
        "answer",
        "body",
        "cap",
        "connection",
        "first",
        "operation",
        "start_on_read",
        "written",
    )

    answer: _parse.Reader
    cap: int
    operation: str

    def __init__(self) -> None:
        self.connection: _Connection | None = None
        self.written = False
        self.body: CappedBody | None = None
        # The request's method, for the reader to start on when the answer's
        # first bytes come (see AttemptAtOnce); None: started with the request.
        self.start_on_read: str | None = None

    def read_on(self, connection: _Connection, cap: int, operation: str) -> None:
        """The attempt has its connection: its answer is read there."""
        self.connection = connection
        self.answer = connection.answer
        self.cap = cap
        self.operation = operation
        self.first = True

    def failure(self, exc: Exception, pool: ConnectionPool) -> Exception:
        """What a failed attempt raises: ``exc`` itself, or the SendError it means."""
        if isinstance(exc, h11.ProtocolError):
            return SendError(f"RemoteProtocolError: {exc}", never_sent=not self.written)
        if isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)):
            reason = "the client was closed" if pool._closed else reason_of(exc)
            if pool._tls and (refused := certificate_refused(reason)) is not False:
                return pool._opener.certificate_refused(reason, certain=refused is True)
            kind = "ReadError" if self.written else "WriteError"
            return SendError(f"{kind}: {reason}", never_sent=not self.written)
        if not self.written or isinstance(exc, VerifClientError | SendError):
            return exc  # a bug before anything left, or our own typed answer
        # Whatever failed once bytes left, the service may have the
        # request: the caller must hear "delivery unknown", not a foreign error.
        return SendError(f"ReadError: {type(exc).__name__}: {exc}", never_sent=False)

    def timeout(self, pool: ConnectionPool, time_limit: float) -> SendError:
        """What an attempt cut at its deadline raises."""
        if self.connection is None:
            through = "" if pool._proxy is None else f" through the proxy {pool._proxy.shown}"
            return SendError(
                f"ConnectTimeout: no connection to {pool._heads.authority}{through} "
                f"within {time_limit:g} s",
                never_sent=True,
            )
        return SendError(
            f"Timeout: no complete answer within {time_limit:g} s (one deadline per attempt)",
            never_sent=not self.written,
        )

    def feed(self, data: bytes) -> Answer | None:
        """Take what arrived (b"" for the peer's close): the answer once
        whole, its body decoded under the size cap.

        An answer whose bytes are those of the connection's last one that
        came whole in one read (a poll's answer names no id, so a service
        sends the same bytes again and again) is that answer again, read under
        the same cap: the reader takes it as whole without parsing it (see
        Reader.replay), the same bytes from the same state giving the same
        answer, and the same body object keeps its hash for the answer cache."""
        answer = self.answer
        first = self.first
        if first:
            if not data:
                # Before any byte of an answer: ``first`` stays set, which
                # tells a stale connection (see AttemptAtOnce._end).
                raise SendError(_DISCONNECTED, never_sent=False)
            self.first = False
            connection = self.connection
            assert connection is not None
            replay = connection.replay
            if (
                replay is not None
                and data == replay[0]
                and self.cap == replay[1]
                and answer.replay()
            ):
                return replay[2]
            method = self.start_on_read
            if method is not None:
                answer.start(method)
        if not data and answer.headers is None:
            raise SendError(_DISCONNECTED, never_sent=False)
        answer.feed(data)
        body = self.body
        if body is None:
            if answer.headers is None:
                return None
            encoding = ""
            for name, value in answer.headers:
                if name == b"content-length":
                    check_declared_length(value.decode("latin-1"), self.cap, self.operation)
                elif name == b"content-encoding":
                    encoding = value.decode("latin-1")
            if not encoding and answer.complete:
                # The usual poll answer: whole in one read, and sent as it is.
                body_bytes = whole_body(answer.chunks, self.cap, self.operation)
                # Typed with None, as the connection's replay is: one tuple, the
                # same object here and there, under mypyc too.
                whole: Answer | None = answer.status, Headers(answer.headers), body_bytes
                if first and answer.memorable():
                    assert self.connection is not None
                    self.connection.replay = (data, self.cap, whole)
                return whole
            body = self.body = CappedBody(encoding, self.cap, self.operation)
        chunks = answer.chunks
        if chunks:
            for chunk in chunks:
                body.feed(chunk)
            chunks.clear()
        if answer.complete:
            head = answer.headers
            assert head is not None
            return answer.status, Headers(head), body.value()
        if not data:  # pragma: no cover - both readers end or refuse at a close
            raise SendError(_DISCONNECTED, never_sent=False)
        return None


class AttemptAtOnce(_Attempt):
    """An attempt on a ready connection driven by its receiver's events,
    with no task, coroutine or future of its own (see ConnectionPool.send_at_once).

    Its steps are those of ``send`` and ``_exchange``, and they share their
    parts: the request's bytes and write, the answer's reading (_Attempt.feed),
    what a failure raises (_failure, _timeout) and the connection's return.
    """

    __slots__ = (
        "context",
        "cut_by_caller",
        "deadlines",
        "done",
        "ended",
        "held",
        "pool",
        "receiver",
        "time_limit",
        "timer",
        "unchecked",
    )

    def __init__(
        self,
        pool: ConnectionPool,
        deadlines: Deadlines,
        connection: _Connection,
        receiver: AsyncioReceiver,
        cap: int,
        operation: str,
        time_limit: float,
        done: AnswerCallback,
        context: Any,
        request: HTTPRequest | bytes,
        cut_at: float,
        unchecked: bool,
    ) -> None:
        """Write ``request`` (bytes: a POST prebuilt, see _spliced) on
        ``connection``, cut at ``cut_at`` if that comes before ``time_limit``
        is up: started here, not by a method of its own (a call per poll).
        ``unchecked``: the connection was taken without the idle check's
        poll(0) (see ConnectionPool.send_at_once)."""
        # _Attempt's __init__ and read_on, inline (a call each per poll).
        self.connection = connection
        self.written = False
        self.body = None
        self.answer = connection.answer
        self.cap = cap
        self.operation = operation
        self.first = True
        self.pool = pool
        self.deadlines = deadlines
        # The connection, as _Attempt's (which is None until a connection is had).
        self.held = connection
        self.receiver = receiver
        self.time_limit = time_limit
        self.done = done
        self.context = context
        self.cut_by_caller = False
        self.timer: asyncio.TimerHandle | None = None
        self.ended = False
        self.unchecked = unchecked
        deadline = pool._now() + time_limit
        if cut_at < deadline:
            deadline = cut_at
            self.cut_by_caller = True
        if not deadlines.add(receiver, deadline):
            self.timer = deadlines.loop.call_at(deadline, receiver.cancel)
        receiver.listener = self
        try:
            if isinstance(request, bytes):
                # The reader starts on the answer's first bytes, unless they
                # are the answer kept for replay: then it need not (see
                # _Attempt.feed), a call fewer per poll. Nothing reads the
                # reader before those bytes come.
                self.start_on_read = "POST"
                data = request
            else:
                self.start_on_read = None
                data = pool._heads.request_bytes(connection.answer, request)
            _write(connection, data, self)
        except Exception as exc:
            # Ended from the loop, as every other end: the caller has its
            # attempt in hand before its callback can run.
            deadlines.loop.call_soon(self._end, exc)

    def on_event(self) -> None:
        receiver = self.receiver
        try:
            while True:
                try:
                    data = receiver.take()
                except anyio.EndOfStream:
                    data = b""
                if data is None:
                    return  # more to come
                whole = self.feed(data)
                if whole is not None:
                    break
        except Exception as exc:
            self._end(exc)
            return
        self.on_data(b"", whole)

    def on_data(self, data: bytes, whole: Answer | None = None) -> None:
        """The bytes that came, from the receiver's data_received (in place of
        on_event and take: a call fewer per poll); or, from on_event, the
        answer it read (``whole``)."""
        if whole is None:
            try:
                whole = self.feed(data)
            except Exception as exc:
                self._end(exc)
                return
            if whole is None:
                return  # more to come
        receiver = self.receiver
        receiver.expecting = False
        self.ended = True
        # _stop_listening and _let_go, inline (a call each per poll).
        receiver.listener = None
        if self.timer is not None:
            self.timer.cancel()
        else:
            self.deadlines.drop(receiver, None)  # discard's, without its call
        # The pool's _release, inline (a call per poll): the connection goes
        # back on the idle stack, or is closed, and the stack's oldest with it
        # if expired.
        pool = self.pool
        connection = self.held
        now = pool._now()
        pool._busy.discard(connection)
        idle = pool._idle
        kept = connection.replay
        if (
            pool._closed
            or len(idle) >= pool._max_idle
            or receiver.unsent_bytes() > 0
            # The answer kept for replay, given again or just kept, left the
            # reader reusable (see feed): the reader is asked only of others.
            or ((kept is None or whole is not kept[2]) and not connection.answer.reusable())
        ):
            connection.close_now()
        else:
            connection.idle_since = now
            idle.append(connection)
            if now - idle[0].idle_since >= pool._expiry:
                idle.popleft().close_now()
            elif 0 < len(data) < READ_SIZE and connection.plain_fd >= 0:
                # This read took less than it asked for: the socket held
                # nothing more a moment ago (see send_at_once).
                pool._drained = connection
        context = self.context
        self.context = None
        try:
            self.done(context, whole)
        finally:
            pool._drained = None

    def _end(self, exc: Exception) -> None:
        """Half-used, cut or refused: the connection is gone, and the caller
        hears what ``send`` would raise (None: cut at the caller's ``cut_at``)."""
        if self.ended:
            return  # abandoned meanwhile
        self._close()
        outcome: Answer | Exception | None
        if isinstance(exc, AttemptCut):
            outcome = None if self.cut_by_caller else self.timeout(self.pool, self.time_limit)
        else:
            outcome = self.failure(exc, self.pool)
            if self.unchecked and self.first and not self.pool._closed:
                outcome = StaleConnection(str(outcome), never_sent=False)
        self.done(self._let_go(), outcome)

    def abandon(self) -> None:
        """The caller is gone (its task cancelled): end the attempt, unheard."""
        if not self.ended:
            self._close()
        self._let_go()

    def _let_go(self) -> Any:
        """The caller's context, no longer held: a caller usually holds its
        attempt, and that cycle would outlive the poll until the collector's
        oldest generation found it (at a thousand connections that was all
        the collector's work, 5 µs a poll)."""
        context = self.context
        self.context = None
        return context

    def _close(self) -> None:
        self.ended = True
        self._stop_listening()
        self.pool._busy.discard(self.held)
        self.held.close_now()

    def _stop_listening(self) -> None:
        receiver = self.receiver
        receiver.listener = None
        if self.timer is not None:
            self.timer.cancel()
        else:
            self.deadlines.drop(receiver, None)  # discard's, without its call


class ConnectionPool:
    """Connections to one origin (the client's ``base_url``), directly or
    through one proxy (see _proxy)."""

    def __init__(
        self,
        base_url: str,
        *,
        verify: bool | ssl.SSLContext = True,
        cert: ClientCert | None = None,
        trusted: tuple[str | None, str | None] = (None, None),
        proxy: Proxy | None = None,
        max_idle: int = 16,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        parts = urlsplit(base_url)
        self._tls = parts.scheme.lower() == "https"
        host = parts.hostname or ""
        self._problem: str | None = None
        port: int | None = None
        try:
            port = parts.port
        except ValueError as exc:
            self._problem = f"InvalidURL: {exc}"
        if parts.scheme.lower() not in ("http", "https"):
            self._problem = (
                f"UnsupportedProtocol: base_url {base_url!r} must start with http:// or https://"
            )
        elif not host:
            self._problem = f"InvalidURL: base_url {base_url!r} names no host"
        self._proxy = proxy
        # Where connections go and how (see _opening), what a request line and
        # its headers are (see _heads): all decided here, so a pool without a
        # proxy does no more per request than before.
        self._opener = Opener(
            host,
            port or (443 if self._tls else 80),
            tls=self._tls,
            verify=verify,
            cert=cert,
            trusted=trusted,
            proxy=proxy,
        )
        self._heads = RequestHeads(parts, proxy, tls=self._tls)
        self._problem = self._heads.problem or self._problem
        self._idle: deque[_Connection] = deque()
        self._busy: set[_Connection] = set()
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._closed = False
        # The running backend's primitives (see _clock), for the event loop
        # the open connections belong to (see _adopt).
        self._owner: object = None
        self._loop: Any = None
        self._now = anyio.current_time
        # On asyncio, the attempts' deadlines share one timer (see _deadlines).
        self._deadlines: Deadlines | None = None
        self._opening: anyio.Semaphore | None = None  # made on the loop (see _adopt)
        # Whether send_at_once may run attempts (see _adopt).
        self._at_once = False
        # The connection an answer's callback just put back, read to the
        # end, while that callback runs (see send_at_once); else None.
        self._drained: _Connection | None = None

    def _adopt(self, owner: object) -> None:
        """Bind the pool to the running event loop. Connections of another
        loop (``asyncio.run`` called again, a module-level client) are never
        reused: their streams belong to that loop, dead or not."""
        for connection in (*self._idle, *self._busy):
            connection.abandon()
        self._idle.clear()
        self._busy.clear()
        self._owner = owner
        self._loop = loop_backend()
        self._now = loop_clock()
        self._deadlines = deadlines_for(self._loop, self._deadlines)
        self._opener.adopt(self._deadlines)
        self._opening = anyio.Semaphore(_OPENING_AT_ONCE)
        # On asyncio and uvloop alike, every connection read by a receiver
        # can be driven by its events (see _take_ready): the loop's own, and
        # anyio's taken over (uvloop for a name, a proxy's tunnel), which
        # close_now ends as it ends the loop's own. Only trio waits on streams.
        self._at_once = self._deadlines is not None and owner is not None

    @property
    def open_connections(self) -> int:
        return len(self._idle) + len(self._busy)

    async def send(
        self, request: HTTPRequest, *, time_limit: float, max_response_bytes: int, operation: str
    ) -> Answer:
        if self._problem is not None:
            raise SendError(self._problem, never_sent=True)
        owner = running_loop()
        if owner is not self._owner:
            self._adopt(owner)
        attempt = _Attempt()
        answer: Answer | None = None
        deadline = self._now() + time_limit
        try:
            # A call cancelled before its request is written must not take (and
            # so destroy) a good idle connection with it: take the cancellation here.
            await self._loop.checkpoint_if_cancelled()
            answer = await self._timed_attempt(
                request, max_response_bytes, operation, attempt, deadline
            )
        except Exception as exc:
            failure = attempt.failure(exc, self)
            try:
                if failure is exc:
                    raise
                # `raise failure from None`, spelled out: mypyc drops a raise's `from`.
                failure.__cause__ = None
                raise failure
            finally:
                # Its traceback holds this frame: kept in it, the two would be
                # a cycle left to the collector's oldest generation.
                del failure
        if answer is None:
            raise attempt.timeout(self, time_limit)
        # Outside the deadline: the answer is whole, and returning the
        # connection (or closing it) must not turn it into a timeout.
        assert attempt.connection is not None
        retired = self._release(attempt.connection, self._now())
        if retired is not None:
            await retired.close()
        return answer

    def ready_at_once(self, owner: object) -> bool:
        """Whether send_at_once can run attempts on the running event loop,
        ``owner`` (asyncio's or uvloop's, connections the loop opened, adopted
        by a send on it)."""
        return self._at_once and owner is self._owner and running_loop() is owner

    def send_at_once(
        self,
        request: HTTPRequest | bytes,
        time_limit: float,
        cut_at: float,
        max_response_bytes: int,
        operation: str,
        done: AnswerCallback,
        context: Any,
        idempotent: bool,
    ) -> AttemptAtOnce | None:
        """``send`` on an idle connection ready for a request now, with no
        task, coroutine or future: the receiver's events drive the attempt,
        and ``done(context, outcome)`` is called from the loop with the answer,
        what ``send`` would raise, or None if cut at ``cut_at`` (the caller's
        own deadline, before ``time_limit`` is up).

        An ``idempotent`` request started from the callback of the answer
        that just put its connection back (the next poll of a chain) takes
        that connection without the idle check's poll(0), a system call a
        poll: the answer's read drained the socket microseconds before, so
        all the check could find is the peer's close (or reset) that came
        with the answer. A request written into such a connection ends
        before any byte of an answer, and ``done`` gets a StaleConnection:
        the caller makes the call again, as though the check had found it.
        Bytes that come after the answer are a race with or without the
        check. Anything else (a send, a connection idle through an event
        loop pass, TLS, an answer in a read that filled its buffer) is
        checked as ever.

        None, and nothing done, if no connection is ready (or ready_at_once()
        is False): ``send`` then waits for one, or opens one.

        A poll waits for its answer for far longer than it takes to make, so
        a worker of thousands holds thousands of attempts: each awaited one
        is a chain of coroutines, a future and a task step per answer, about
        a third of a poll's CPU on asyncio.
        """
        deadlines = self._deadlines
        if not self._at_once or deadlines is None:
            return None
        drained = self._drained if idempotent else None
        connection = self._take_ready(drained)
        if connection is None:
            return None
        receiver = connection.receiver
        assert receiver is not None  # _take_ready takes only those
        return AttemptAtOnce(
            self,
            deadlines,
            connection,
            receiver,
            max_response_bytes,
            operation,
            time_limit,
            done,
            context,
            request,
            cut_at,
            connection is drained,
        )

    def _timed_attempt(
        self, request: HTTPRequest, cap: int, operation: str, attempt: _Attempt, deadline: float
    ) -> Awaitable[Answer | None]:
        """One attempt, cut at ``deadline``: None if it was.

        A plain function choosing the attempt's coroutine: an attempt in
        flight holds its chain of coroutines while it waits, and the garbage
        collector walks every link of every one."""
        deadlines = self._deadlines
        if deadlines is not None:
            connection = self._take_ready()
            if connection is not None:
                return self._exchange(connection, request, cap, operation, attempt, deadline)
        return self._attempt_in_scope(request, cap, operation, attempt, deadline, deadlines)

    async def _attempt_in_scope(
        self,
        request: HTTPRequest,
        cap: int,
        operation: str,
        attempt: _Attempt,
        deadline: float,
        deadlines: Deadlines | None,
    ) -> Answer | None:
        """An attempt under a cancel scope: a connection to check out (or
        open), or a stream of anyio's to read."""
        if deadlines is not None:
            scope = self._loop.create_cancel_scope()
            if not deadlines.add(scope, deadline):
                deadlines = None
                scope = self._loop.create_cancel_scope(deadline=deadline)
        else:
            scope = self._loop.create_cancel_scope(deadline=deadline)
        try:
            with scope:
                connection = await self._checkout()
                return await self._exchange(connection, request, cap, operation, attempt)
            return None
        finally:
            if deadlines is not None:
                deadlines.discard(scope)

    def _take_ready(self, drained: _Connection | None = None) -> _Connection | None:
        """The newest idle connection, if a request can go on it with no wait
        (fresh, untouched, read by a receiver); else None, and nothing taken:
        the cancel scope's path checks it out (or closes it) as ever.
        ``drained`` is taken without the idle check's poll(0) (see send_at_once)."""
        idle = self._idle
        if not idle:
            return None
        connection = idle[-1]
        receiver = connection.receiver
        # _fresh and _untouched, inline (three calls per poll): not expired,
        # nothing arrived (no bytes, no close) while it was idle.
        if (
            receiver is None
            or self._now() - connection.idle_since >= self._expiry
            or receiver.stray
            or (connection is not drained and connection.poller.poll(0))
        ):
            return None
        idle.pop()
        self._busy.add(connection)
        return connection

    def _fresh(self, connection: _Connection, now: float) -> bool:
        """An idle connection may carry a request: not past the keep-alive
        expiry, and nothing (no bytes, no close) arrived while it was idle."""
        return now - connection.idle_since < self._expiry and _untouched(connection)

    async def _exchange(
        self,
        connection: _Connection,
        request: HTTPRequest,
        cap: int,
        operation: str,
        attempt: _Attempt,
        cut_at: float | None = None,
    ) -> Answer | None:
        """Write the request and read its answer: one coroutine for both.

        With ``cut_at`` (a ready connection on asyncio, see _take_ready), the
        attempt has no cancel scope and this is the only coroutine below
        ``send`` while it waits: writing never waits here (a write(2), or the
        transport's buffer for the rest), so the attempt's one wait is its
        receiver's, and the shared deadlines cut that wait directly at
        ``cut_at`` (None is returned then). A cancel scope's entry, exit and
        timer cost a fifth of a poll's CPU on asyncio.
        """
        attempt.read_on(connection, cap, operation)
        receiver = connection.receiver
        cut_by = None
        own_timer = None
        if cut_at is not None:
            cut_by = self._deadlines
            assert cut_by is not None
            assert receiver is not None
            if not cut_by.add(receiver, cut_at):
                own_timer = cut_by.loop.call_at(cut_at, receiver.cancel)
        try:
            rest = _write(
                connection, self._heads.request_bytes(connection.answer, request), attempt
            )
            if rest:
                assert connection.stream is not None  # only a stream's write leaves a rest
                await connection.stream.send(rest)
            # A request was just written on a connection with nothing left
            # unread (new, or found clean by _release): read first.
            while True:
                try:
                    if receiver is None:
                        assert connection.stream is not None  # a connection has one or the other
                        data = await connection.stream.receive(READ_SIZE)
                    else:
                        taken = receiver.take()
                        while taken is None:
                            await receiver.arrival()
                            taken = receiver.take()
                        data = taken
                except anyio.EndOfStream:
                    data = b""
                whole = attempt.feed(data)
                if whole is not None:
                    if receiver is not None:
                        # Whatever comes now was never asked for.
                        receiver.expecting = False
                    return whole
        except BaseException as exc:
            # Half-used, cancelled, cut or refused: its state is unknown, so it is gone.
            self._busy.discard(connection)
            await connection.close()
            if isinstance(exc, AttemptCut):
                return None
            # Named, not a bare raise: after the await above, mypyc's build
            # (hatch_build.py) would raise whatever the thread handles now.
            raise exc
        finally:
            if own_timer is not None:
                own_timer.cancel()
            elif cut_by is not None:
                cut_by.discard(receiver)

    def id_requests(self, encode: Callable[[int], HTTPRequest]) -> IdRequests | None:
        """The requests ``encode`` makes of an id, as this pool writes them,
        prebuilt (see _spliced); None if the id cannot be spliced in."""
        return self._heads.id_requests(encode)

    async def _connect(self) -> _Connection:
        return await self._opener.connect(self._deadlines)

    async def _checkout(self) -> _Connection:
        idle = self._idle
        if idle:
            now = self._now()
            while idle:
                connection = idle.pop()
                if self._fresh(connection, now):
                    self._busy.add(connection)
                    return connection
                await connection.close()
        assert self._opening is not None
        # No second look at the idle connections once this call's turn comes:
        # one put back meanwhile is its caller's next (see _take_ready), and
        # taking it would send that caller here, to wait for a turn in its place.
        async with self._opening:
            connection = await self._connect()
        if self._closed:
            await connection.close()
            raise SendError("ConnectError: the client was closed", never_sent=True)
        if _spoke_first(connection):
            # Bytes before any request are no answer to this one (nor a close
            # a reason to call it delivered): nothing was written, and the
            # retry rules can treat it so.
            await connection.close()
            raise SendError(
                "RemoteProtocolError: the server sent bytes (or closed) "
                "before it was asked anything",
                never_sent=True,
            )
        self._busy.add(connection)
        return connection

    def _release(self, connection: _Connection, now: float) -> _Connection | None:
        """Put a connection back after its answer; the connection to close,
        if any: this one, or the oldest idle one, expired. (A plain function:
        the close is awaited only when there is one, not a coroutine per call.)
        An attempt at once does the same inline (AttemptAtOnce.on_data)."""
        self._busy.discard(connection)
        receiver = connection.receiver
        if (
            self._closed
            or len(self._idle) >= self._max_idle
            # Answered before it had read all of the request: what it did not
            # read would be written after the next request's first bytes.
            or (receiver is not None and receiver.unsent_bytes() > 0)
            or not connection.answer.reusable()
        ):
            return connection
        connection.idle_since = now
        idle = self._idle
        idle.append(connection)
        # The stack's bottom is its oldest: expire one there per return, so
        # connections a shrinking load no longer needs do not stay open forever.
        if now - idle[0].idle_since >= self._expiry:
            return idle.popleft()
        return None

    async def aclose(self) -> None:
        self._closed = True
        if self._owner is not None and running_loop() is not self._owner:
            self._adopt(None)  # closed from another loop: theirs is not ours to use
        connections = [*self._idle, *self._busy]
        self._idle.clear()
        self._busy.clear()
        for connection in connections:
            # A call still waiting on one of these ends with a ReadError.
            await connection.close()


def _write(connection: _Connection, data: bytes, attempt: _Attempt) -> bytes:
    """Write the request, and return what is left of it for the stream's
    send() (nothing, unless it goes through anyio's stream).

    Over plain TCP the request goes out with one write(2) on the socket the
    stream wraps: the stream's send() would add a cancellation check and a
    full pass of the event loop after the write (a yield anyio makes so that a
    send always checkpoints), about a tenth of a request's CPU. The answer's
    receive, which always waits, is this attempt's checkpoint instead. The
    stream's own buffer is empty here (every earlier send waited until it
    drained, and behind an AsyncioReceiver, whose transport no longer tells
    anyio when it drains, _release closes a connection with bytes unsent; a
    connection whose send failed is closed), so nothing can be reordered;
    what the kernel does not take is sent through the stream.

    It also tells "never sent" exactly: a write(2) that fails took no byte (a
    peer that reset the connection after the idle check), so the attempt is
    left unwritten and the request can be sent again. Through the stream
    (TLS, or the rest of a partial write) any byte may have left.
    """
    receiver = connection.receiver
    if receiver is not None:
        # From here on, bytes that arrive are the answer.
        receiver.expecting = True
    fd = connection.plain_fd
    if fd >= 0:
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            attempt.written = True
            return b""
        data = data[sent:]
    attempt.written = True
    if receiver is not None:
        # Buffered by the transport: the wait for the answer waits in its place.
        receiver.write(data)
        return b""
    return data  # for the stream to send


def _untouched(connection: _Connection) -> bool:
    """Nothing arrived since the last answer: no bytes, no close. One syscall."""
    if _taken_in(connection):
        return False
    # Readable means bytes arrived or the peer closed (POLLHUP/POLLERR always count).
    return not connection.poller.poll(0)


def _spoke_first(connection: _Connection) -> bool:
    """A new connection on which the server sent (or closed) before any request."""
    if _taken_in(connection):
        return True
    # Over TLS the socket may hold the handshake's last records (TLS 1.3
    # session tickets): only plain TCP's bytes are the server's own words.
    return connection.plain_fd >= 0 and bool(connection.poller.poll(0))


def _taken_in(connection: _Connection) -> bool:
    """Bytes (or a close) already off the socket and not read as an answer."""
    receiver = connection.receiver
    return receiver.stray if receiver is not None else _read_ahead(connection.stream)


def _read_ahead(stream: object) -> bool:
    """Bytes anyio already took off the socket but nobody read.

    A peek at the socket cannot see them: the TLS layer's buffers, and the
    queue asyncio's protocol fills while a receive is pending. anyio has no
    public attribute for this, so its internals are looked at defensively.
    """
    while True:
        ssl_object = getattr(stream, "_ssl_object", None)
        if ssl_object is not None:
            read_bio = getattr(stream, "_read_bio", None)
            if ssl_object.pending() or (read_bio is not None and read_bio.pending):
                return True
            stream = getattr(stream, "transport_stream", None)
            continue
        protocol = getattr(stream, "_protocol", None)
        if protocol is None:
            return False
        return bool(
            getattr(protocol, "read_queue", None)
            or getattr(protocol, "is_at_eof", False)
            or getattr(protocol, "exception", None) is not None
        )
